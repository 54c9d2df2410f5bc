// MIL tokenizer (see mil_lexer.h).
#include "compiler/mil/mil_lexer.h"

#include <cctype>

#include <fmt/format.h>

#include "base/error.h"

namespace orion::compiler::mil {

void parse_error(const std::string& source, int line, int col, const std::string& msg, const std::string& hint) {
  throw Error(ErrorKind::Input, fmt::format("line {}, column {}: {}", line, col, msg), {source, {}, -1, hint});
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Token::Kind::End: return "end of input";
    case Token::Kind::String:
      return fmt::format("string \"{}\"", t.text.size() > 40 ? t.text.substr(0, 40) + "..." : t.text);
    case Token::Kind::Ident:
    case Token::Kind::Number:
    case Token::Kind::Punct: return fmt::format("'{}'", t.text.size() > 40 ? t.text.substr(0, 40) + "..." : t.text);
  }
  return "?";
}

namespace {

class Lexer {
 public:
  Lexer(std::string_view s, const std::string& source) : s_(s), source_(source) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space();
      Token t;
      t.line = line_, t.col = col_;
      if (i_ >= s_.size()) {
        out.push_back(t);
        return out;
      }
      char c = s_[i_];
      if (is_ident_start(c)) {
        t.kind = Token::Kind::Ident, t.text = take_while([](char ch) { return is_ident_char(ch); });
      } else if (starts_number()) {
        t.kind = Token::Kind::Number, t.text = number();
      } else if (c == '"') {
        t.kind = Token::Kind::String, t.text = string(t);
      } else if (c == '-' && peek(1) == '>') {
        t.kind = Token::Kind::Punct, t.text = "->", advance(2);
      } else if (std::string_view("()[]{}<>,=;").find(c) != std::string_view::npos) {
        t.kind = Token::Kind::Punct, t.text = std::string(1, c), advance(1);
      } else {
        parse_error(source_, line_, col_,
                    std::isprint(uint8_t(c)) ? fmt::format("unexpected character '{}'", c)
                                             : fmt::format("unexpected byte 0x{:02X}", uint8_t(c)));
      }
      out.push_back(std::move(t));
    }
  }

 private:
  static bool is_ident_start(char c) { return std::isalpha(uint8_t(c)) || c == '_'; }
  static bool is_ident_char(char c) { return std::isalnum(uint8_t(c)) || c == '_' || c == '@'; }
  char peek(size_t k) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }

  void advance(size_t n) {
    for (size_t k = 0; k < n && i_ < s_.size(); k++, i_++) {
      if (s_[i_] == '\n') line_++, col_ = 1;
      else col_++;
    }
  }

  template <typename F>
  std::string take_while(F f) {
    size_t b = i_;
    while (i_ < s_.size() && f(s_[i_])) advance(1);
    return std::string(s_.substr(b, i_ - b));
  }

  void skip_space() {
    for (;;) {
      while (i_ < s_.size() && std::isspace(uint8_t(s_[i_]))) advance(1);
      if (peek(0) == '/' && peek(1) == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') advance(1);
        continue;
      }
      return;
    }
  }

  bool starts_number() const {
    char c = peek(0);
    if (std::isdigit(uint8_t(c))) return true;
    if (c == '.' && std::isdigit(uint8_t(peek(1)))) return true;
    if (c != '-') return false;
    char d = peek(1);
    return std::isdigit(uint8_t(d)) || (d == '.' && std::isdigit(uint8_t(peek(2)))) || s_.substr(i_ + 1, 3) == "inf" ||
           s_.substr(i_ + 1, 3) == "nan";
  }

  // -?(digits[.digits][e±digits] | 0x hexdigits[.hexdigits]p±digits | inf | nan)
  std::string number() {
    size_t b = i_;
    if (peek(0) == '-') advance(1);
    if (std::isalpha(uint8_t(peek(0)))) {  // -inf, -nan
      take_while([](char ch) { return std::isalpha(uint8_t(ch)); });
      return std::string(s_.substr(b, i_ - b));
    }
    bool hex = peek(0) == '0' && (peek(1) == 'x' || peek(1) == 'X');
    if (hex) advance(2);
    auto digit = [hex](char ch) { return hex ? std::isxdigit(uint8_t(ch)) != 0 : std::isdigit(uint8_t(ch)) != 0; };
    take_while([&](char ch) { return digit(ch) || ch == '.'; });
    char e = peek(0);
    if ((hex && (e == 'p' || e == 'P')) || (!hex && (e == 'e' || e == 'E'))) {
      advance(1);
      if (peek(0) == '+' || peek(0) == '-') advance(1);
      take_while([](char ch) { return std::isdigit(uint8_t(ch)) != 0; });
    }
    return std::string(s_.substr(b, i_ - b));
  }

  std::string string(const Token& start) {
    advance(1);
    std::string out;
    for (;;) {
      if (i_ >= s_.size() || s_[i_] == '\n')
        parse_error(source_, start.line, start.col, "unterminated string", "close it with '\"' on the same line");
      char c = s_[i_];
      if (c == '"') {
        advance(1);
        return out;
      }
      if (c == '\\' && (peek(1) == '"' || peek(1) == '\\')) advance(1), c = s_[i_];
      out += c;
      advance(1);
    }
  }

  std::string_view s_;
  const std::string& source_;
  size_t i_ = 0;
  int line_ = 1, col_ = 1;
};

}  // namespace

std::vector<Token> tokenize(std::string_view text, const std::string& source) { return Lexer(text, source).run(); }

}  // namespace orion::compiler::mil
