// Jinja lexer: template source → tokens. Text between tags comes out as one Text token with the
// whitespace control already applied, the way Jinja's own lexer does it:
//   {%- / {{- / {#-   strip all whitespace before the tag;  -%} / -}} / -#}  all whitespace after;
//   trim_blocks       drops the first newline after a block or comment tag;
//   lstrip_blocks     drops spaces and tabs from the start of a line up to a block or comment tag;
//   {%+ / +%}         turn lstrip_blocks / trim_blocks off for that tag.
// Newlines are normalised to \n and one trailing newline is dropped (keep_trailing_newline=False).
#pragma once
#include <string>
#include <vector>

namespace orion::jinja {

enum class Tok {
  Text,        // template text, value = the text
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,        // identifier or keyword
  String,      // string literal, value = the unescaped text
  Int,
  Float,
  Op,  // operator or punctuation: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } . , : |
  End  // end of the template
};

struct Token {
  Tok kind;
  std::string value;
  size_t offset;  // byte offset in the normalised source, for line/column in errors
};

struct LexOptions {
  bool trim_blocks = true, lstrip_blocks = true;  // as transformers renders chat templates
};

// The normalised source (what Token::offset points into) and its tokens.
struct Lexed {
  std::string source;
  std::vector<Token> tokens;
};

// Throws orion::Error naming `name` and the line and column of a malformed tag or literal.
Lexed lex(const std::string& source, const std::string& name, const LexOptions& options);

// "line L, column C" of a byte offset (1-based).
std::string location(const std::string& source, size_t offset);
[[noreturn]] void throw_template_error(const std::string& name, const std::string& source, size_t offset,
                                       const std::string& message);

}  // namespace orion::jinja
