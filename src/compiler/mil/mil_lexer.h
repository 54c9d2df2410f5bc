// Tokens of MIL text, each with its line and column (1-based) for error messages.
//
//   identifiers  [A-Za-z_][A-Za-z0-9_@]*         main, tensor, fp16, x, BLOBFILE, inf
//   numbers      -12  3  0.00001  1.0e-08  0x1p-4  -inf
//   strings      "..." with \" and \\ escapes
//   punctuation  ( ) [ ] { } < > , = ;  and the arrow ->
// `//` starts a comment that runs to the end of the line.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace orion::compiler::mil {

struct Token {
  enum class Kind { Ident, Number, String, Punct, End } kind = Kind::End;
  std::string text;  // identifier, number as written, string contents (unescaped), punctuation
  int line = 1, col = 1;
};

// Splits the whole text; an Input error naming `source`, "line L, column C" on a character that
// starts no token or an unterminated string.
std::vector<Token> tokenize(std::string_view text, const std::string& source);

// "line L, column C: msg" as an Input error of `source`.
[[noreturn]] void parse_error(const std::string& source, int line, int col, const std::string& msg,
                              const std::string& hint = {});

// How a token reads in "expected X, found Y": 'text', "string", end of input.
std::string describe(const Token& t);

}  // namespace orion::compiler::mil
