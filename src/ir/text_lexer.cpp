// The IR text lexer (text_lexer.h).
#include "ir/text_lexer.h"

#include <cctype>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"

namespace orion::ir::text_detail {
namespace {
bool ident_start(char c) { return std::isalpha(uint8_t(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(uint8_t(c)) || c == '_' || c == '@'; }
}  // namespace

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "end of input";
    case Tok::Newline: return "end of line";
    case Tok::String: return t.text.size() > 24 ? "a string" : fmt::format("\"{}\"", t.text);
    case Tok::ValueName: return "'%" + t.text + "'";
    case Tok::Ident:
    case Tok::Number:
    case Tok::Punct: return "'" + t.text + "'";
  }
  return "?";
}

const Token& Lexer::peek() {
  if (!has_) tok_ = lex(), has_ = true;
  return tok_;
}

Token Lexer::next() {
  peek();
  has_ = false;
  return tok_;
}

void Lexer::fail(int line, int col, const std::string& msg) const {
  throw Error(ErrorKind::Input, msg, {source_, fmt::format("line {}, column {}", line, col), -1, {}});
}

void Lexer::advance() {
  if (at() == '\n') line_++, line_start_ = i_ + 1;
  i_++;
}

void Lexer::skip_blanks_and_comments() {
  for (;;) {
    if (at() == ' ' || at() == '\t' || at() == '\r') advance();
    else if (at() == '/' && at(1) == '/')
      while (i_ < s_.size() && at() != '\n') advance();
    else return;
  }
}

Token Lexer::lex() {
  skip_blanks_and_comments();
  Token t;
  t.line = line_, t.col = col();
  char c = at();
  if (i_ >= s_.size()) return t;  // End
  if (c == '\n') return advance(), t.kind = Tok::Newline, t.text = "\n", t;
  if (ident_start(c)) return t.kind = Tok::Ident, t.text = word(), t;
  if (c == '%') {
    advance();
    t.kind = Tok::ValueName;
    if (at() == '"') t.quoted = true, t.text = string_body(t);
    else if (ident_start(at())) t.text = word();
    else fail(t.line, t.col + 1, "expected a name after '%'");
    return t;
  }
  if (c == '"') return t.kind = Tok::String, t.text = string_body(t), t;
  if (std::isdigit(uint8_t(c)) || (c == '-' && (std::isdigit(uint8_t(at(1))) || ident_start(at(1)))))
    return t.kind = Tok::Number, t.text = number(), t;
  if (c != '\0' && std::strchr("=:,()[]{}<>#", c)) return advance(), t.kind = Tok::Punct, t.text = std::string(1, c), t;
  std::string shown = std::isprint(uint8_t(c)) ? std::string(1, c) : fmt::format("\\x{:02X}", uint8_t(c));
  fail(t.line, t.col, fmt::format("unexpected character '{}'", shown));
}

std::string Lexer::word() {
  std::string w;
  while (ident_char(at())) w += at(), advance();
  return w;
}

// -?digits[.digits][e[+-]digits], or -inf / -nan (a '-' followed by a word).
std::string Lexer::number() {
  std::string n;
  if (at() == '-') n += at(), advance();
  if (ident_start(at())) return n + word();
  auto digits = [&] {
    while (std::isdigit(uint8_t(at()))) n += at(), advance();
  };
  digits();
  if (at() == '.') n += at(), advance(), digits();
  if ((at() == 'e' || at() == 'E') &&
      (std::isdigit(uint8_t(at(1))) || ((at(1) == '+' || at(1) == '-') && std::isdigit(uint8_t(at(2)))))) {
    n += at(), advance();
    if (at() == '+' || at() == '-') n += at(), advance();
    digits();
  }
  return n;
}

// The text between double quotes, unescaping \" \\ and \XX.
std::string Lexer::string_body(const Token& t) {
  advance();  // opening quote
  std::string out;
  for (;;) {
    char c = at();
    if (i_ >= s_.size() || c == '\n') fail(t.line, t.col, "unterminated string");
    if (c == '"') return advance(), out;
    if (c != '\\') {
      out += c, advance();
      continue;
    }
    int l = line_, k = col();
    advance();
    if (at() == '"' || at() == '\\') {
      out += at(), advance();
    } else if (std::isxdigit(uint8_t(at())) && std::isxdigit(uint8_t(at(1)))) {
      out += char(std::stoi(std::string{at(), at(1)}, nullptr, 16));
      advance(), advance();
    } else {
      fail(l, k, "unknown escape in string (expected \\\", \\\\ or \\XX)");
    }
  }
}

}  // namespace orion::ir::text_detail
