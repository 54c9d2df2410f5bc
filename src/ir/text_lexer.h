// The lexer of the IR text form (grammar in text.h): turns the text into tokens on demand and
// remembers where each starts, so parse errors can say "line L, column C". Internal to the parser
// (text_parse.cpp); not a public API.
#pragma once
#include <string>
#include <string_view>

namespace orion::ir::text_detail {

enum class Tok { Ident, ValueName, Number, String, Punct, Newline, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;       // identifier, value name (without %), number spelling, unescaped string, punct
  int line = 1, col = 1;  // 1-based; columns count bytes
  bool quoted = false;    // a value name written %"..."
};

// How an error message shows a token: 'relu', '%x', end of line, ...
std::string describe(const Token& t);

class Lexer {
 public:
  Lexer(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  const Token& peek();
  Token next();
  // An Input error with file = the source name and field = "line L, column C".
  [[noreturn]] void fail(int line, int col, const std::string& msg) const;

 private:
  char at(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  void advance();
  int col() const { return int(i_ - line_start_) + 1; }
  void skip_blanks_and_comments();
  Token lex();
  std::string word();
  std::string number();
  std::string string_body(const Token& t);

  std::string_view s_;
  const std::string& source_;
  size_t i_ = 0, line_start_ = 0;
  int line_ = 1;
  Token tok_;
  bool has_ = false;
};

}  // namespace orion::ir::text_detail
