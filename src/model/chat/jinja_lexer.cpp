#include "model/chat/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "base/error.h"
#include "model/tokenizer/unicode.h"

namespace orion::jinja {

std::string location(const std::string& source, size_t offset) {
  int line = 1, col = 1;
  for (size_t i = 0; i < offset && i < source.size(); i++) {
    if (source[i] == '\n') {
      line++;
      col = 1;
    } else if ((uint8_t(source[i]) & 0xc0) != 0x80) {  // count characters, not UTF-8 bytes
      col++;
    }
  }
  return fmt::format("line {}, column {}", line, col);
}

void throw_template_error(const std::string& name, const std::string& source, size_t offset, const std::string& message) {
  throw Error(ErrorKind::Input, location(source, offset) + ": " + message, {name, {}, -1, {}});
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string rstrip_space(const std::string& s) {
  size_t n = s.size();
  while (n > 0 && is_space(s[n - 1])) n--;
  return s.substr(0, n);
}

class Lexer {
 public:
  Lexer(std::string src, const std::string& name, const LexOptions& o) : name_(name), opt_(o) {
    // Newlines normalised to \n; one trailing newline dropped.
    for (size_t i = 0; i < src.size(); i++) {
      if (src[i] == '\r') {
        out_.source += '\n';
        if (i + 1 < src.size() && src[i + 1] == '\n') i++;
      } else {
        out_.source += src[i];
      }
    }
    if (!out_.source.empty() && out_.source.back() == '\n') out_.source.pop_back();
  }

  Lexed run() {
    const std::string& s = out_.source;
    while (pos_ < s.size()) {
      size_t tag = find_tag(pos_);
      std::string text = s.substr(pos_, tag - pos_);
      if (tag == s.size()) {
        emit(Tok::Text, text, pos_);
        break;
      }
      const char kind = s[tag + 1];  // '{', '%' or '#'
      const char sign = tag + 2 < s.size() ? s[tag + 2] : 0;
      if (sign == '-') {
        text = rstrip_space(text);
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        const size_t l = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        bool blank = l < text.size();
        for (size_t i = l; i < text.size(); i++) blank = blank && is_space(text[i]);
        if (blank && (l > 0 || line_starting_)) text.resize(l);
      }
      emit(Tok::Text, text, pos_);
      pos_ = tag + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (kind == '#') comment(tag);
      else tag_body(kind == '{', tag);
    }
    out_.tokens.push_back({Tok::End, "", s.size()});
    return std::move(out_);
  }

 private:
  size_t find_tag(size_t from) const {
    const std::string& s = out_.source;
    for (size_t i = from; i + 1 < s.size(); i++)
      if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) return i;
    return s.size();
  }
  void emit(Tok k, std::string v, size_t at) {
    if (k == Tok::Text && v.empty()) return;
    out_.tokens.push_back({k, std::move(v), at});
  }
  [[noreturn]] void fail(size_t at, const std::string& msg) { throw_template_error(name_, out_.source, at, msg); }

  // After a tag's closing delimiter: -X} eats all whitespace, trim_blocks one newline (blocks and
  // comments only), +%} nothing.
  void after_tag_end(char sign, bool is_block) {
    const std::string& s = out_.source;
    size_t start = pos_;
    if (sign == '-') {
      while (pos_ < s.size() && is_space(s[pos_])) pos_++;
    } else if (sign != '+' && is_block && opt_.trim_blocks && pos_ < s.size() && s[pos_] == '\n') {
      pos_++;
    }
    line_starting_ = pos_ > start && s[pos_ - 1] == '\n';
  }

  void comment(size_t tag) {
    const size_t end = out_.source.find("#}", pos_);
    if (end == std::string::npos) fail(tag, "missing end of comment tag #}");
    const char sign = end > pos_ && (out_.source[end - 1] == '-' || out_.source[end - 1] == '+') ? out_.source[end - 1] : 0;
    pos_ = end + 2;
    after_tag_end(sign, true);
  }

  void tag_body(bool variable, size_t tag) {
    const std::string& s = out_.source;
    emit(variable ? Tok::VarBegin : Tok::BlockBegin, "", tag);
    const char close = variable ? '}' : '%';
    int depth = 0;  // open brackets: }} inside a dict literal does not close the tag
    while (true) {
      while (pos_ < s.size() && is_space(s[pos_])) pos_++;
      if (pos_ >= s.size()) fail(tag, variable ? "missing end of print tag }}" : "missing end of block tag %}");
      const char c = s[pos_];
      if (depth == 0) {
        const char sign = (c == '-' || c == '+') ? c : 0;
        const size_t at = pos_ + (sign ? 1 : 0);
        if (at + 1 < s.size() && s[at] == close && s[at + 1] == '}' && !(variable && sign == '+')) {
          pos_ = at + 2;
          emit(variable ? Tok::VarEnd : Tok::BlockEnd, "", at);
          after_tag_end(sign, !variable);
          return;
        }
      }
      if (std::isalpha(uint8_t(c)) || c == '_') {
        size_t b = pos_;
        while (pos_ < s.size() && (std::isalnum(uint8_t(s[pos_])) || s[pos_] == '_')) pos_++;
        emit(Tok::Name, s.substr(b, pos_ - b), b);
      } else if (std::isdigit(uint8_t(c))) {
        number();
      } else if (c == '\'' || c == '"') {
        string_literal();
      } else {
        op(depth);
      }
    }
  }

  void number() {
    const std::string& s = out_.source;
    size_t b = pos_;
    bool is_float = false;
    while (pos_ < s.size() && (std::isdigit(uint8_t(s[pos_])) || s[pos_] == '_')) pos_++;
    if (pos_ + 1 < s.size() && s[pos_] == '.' && std::isdigit(uint8_t(s[pos_ + 1]))) {
      is_float = true;
      pos_++;
      while (pos_ < s.size() && std::isdigit(uint8_t(s[pos_]))) pos_++;
    }
    if (pos_ < s.size() && (s[pos_] == 'e' || s[pos_] == 'E')) {
      size_t e = pos_ + 1;
      if (e < s.size() && (s[e] == '+' || s[e] == '-')) e++;
      if (e < s.size() && std::isdigit(uint8_t(s[e]))) {
        is_float = true;
        pos_ = e;
        while (pos_ < s.size() && std::isdigit(uint8_t(s[pos_]))) pos_++;
      }
    }
    std::string text;
    for (size_t i = b; i < pos_; i++)
      if (s[i] != '_') text += s[i];
    emit(is_float ? Tok::Float : Tok::Int, text, b);
  }

  // Python string-literal escapes (\n \t \r \\ \' \" \xHH \uXXXX \UXXXXXXXX); others kept as written.
  void string_literal() {
    const std::string& s = out_.source;
    const char q = s[pos_];
    const size_t b = pos_++;
    std::string v;
    while (true) {
      if (pos_ >= s.size()) fail(b, "unterminated string literal");
      char c = s[pos_++];
      if (c == q) break;
      if (c != '\\' || pos_ >= s.size()) {
        v += c;
        continue;
      }
      char e = s[pos_++];
      switch (e) {
        case 'n': v += '\n'; break;
        case 't': v += '\t'; break;
        case 'r': v += '\r'; break;
        case '0': v += '\0'; break;
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; k++) {
            const char h = pos_ + k < s.size() ? s[pos_ + k] : 0;
            if (!std::isxdigit(uint8_t(h))) fail(pos_ - 2, "bad \\" + std::string(1, e) + " escape");
            cp = cp * 16 + uint32_t(std::isdigit(uint8_t(h)) ? h - '0' : std::tolower(uint8_t(h)) - 'a' + 10);
          }
          if (cp > 0x10ffff) fail(pos_ - 2, "escape beyond U+10FFFF");
          append_utf8(v, cp);
          pos_ += n;
          break;
        }
        default: v += '\\', v += e;
      }
    }
    emit(Tok::String, v, b);
  }

  void op(int& depth) {
    const std::string& s = out_.source;
    static const char* two[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* t : two)
      if (s.compare(pos_, 2, t) == 0) {
        emit(Tok::Op, t, pos_);
        pos_ += 2;
        return;
      }
    const char c = s[pos_];
    if (!std::strchr("+-*/%~<>=()[]{}.,:|", c)) fail(pos_, fmt::format("unexpected character '{}'", c));
    if (c == '(' || c == '[' || c == '{') depth++;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) depth--;
    emit(Tok::Op, std::string(1, c), pos_);
    pos_++;
  }

  const std::string& name_;
  LexOptions opt_;
  Lexed out_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

Lexed lex(const std::string& source, const std::string& name, const LexOptions& options) {
  return Lexer(source, name, options).run();
}

}  // namespace orion::jinja
