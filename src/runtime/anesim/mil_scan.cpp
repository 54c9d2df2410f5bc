// A line-oriented reader of MIL text (see mil_scan.h).
#include "runtime/anesim/mil_scan.h"

#include <cctype>

#include <fmt/format.h>

#include "base/error.h"

namespace orion::runtime::anesim {
namespace {

// A cursor over one line; every failure names the line and what was expected.
class Cursor {
 public:
  Cursor(std::string_view s, int line, const std::string& source) : s_(s), line_(line), source_(source) {}

  void skip_space() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) at_++;
  }
  bool accept(std::string_view lit) {
    skip_space();
    if (s_.substr(at_, lit.size()) != lit) return false;
    at_ += lit.size();
    return true;
  }
  void expect(std::string_view lit) {
    if (!accept(lit)) fail(fmt::format("expected '{}'", lit));
  }
  std::string word() {  // identifier or number: [A-Za-z0-9_.@-]+
    skip_space();
    size_t b = at_;
    while (at_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[at_])) || s_[at_] == '_' || s_[at_] == '.' ||
                               s_[at_] == '@' || s_[at_] == '-'))
      at_++;
    if (b == at_) fail("expected a name");
    return std::string(s_.substr(b, at_ - b));
  }
  MilValueType type() {
    MilValueType t;
    std::string w = word();
    if (w != "tensor") {
      t.elem = w;
      return t;
    }
    t.tensor = true;
    expect("<");
    t.elem = word();
    expect(",");
    expect("[");
    while (!accept("]")) {
      std::string d = word();
      try {
        t.shape.push_back(std::stoll(d));
      } catch (const std::exception&) {
        fail(fmt::format("'{}' is not a dimension", d));
      }
      accept(",");
    }
    expect(">");
    return t;
  }
  std::string_view rest() const { return s_.substr(at_); }
  [[noreturn]] void fail(const std::string& what) const {
    throw_input_error(source_, fmt::format("line {}: {} at column {} of: {}", line_, what, at_ + 1, s_), "",
                      -1, "MIL is written one statement per line, as the ANE's tools write it");
  }

 private:
  std::string_view s_;
  size_t at_ = 0;
  int line_;
  const std::string& source_;
};

// op(k = v, k = (a, b), ...) — for const the arguments are empty: const()[...].
void read_args(Cursor& c, MilStatement& st) {
  c.expect("(");
  if (c.accept(")")) return;
  do {
    MilArg a;
    a.name = c.word();
    c.expect("=");
    if (c.accept("(")) {
      a.tuple = true;
      do a.values.push_back(c.word());
      while (c.accept(","));
      c.expect(")");
    } else {
      a.values.push_back(c.word());
    }
    st.args.push_back(std::move(a));
  } while (c.accept(","));
  c.expect(")");
}

MilStatement read_statement(Cursor& c, int line) {
  MilStatement st;
  st.line = line;
  do {
    MilValueType t = c.type();
    st.results.emplace_back(c.word(), std::move(t));
  } while (c.accept(","));
  c.expect("=");
  st.op = c.word();
  read_args(c, st);
  c.expect("[");  // [name = string("y"), val = ...]; — the attributes are not needed here
  return st;
}

void read_header(Cursor& c, MilScan& m) {
  c.expect("func");
  c.word();  // function name
  c.expect("<");
  m.function_target = c.word();
  c.expect(">");
  c.expect("(");
  if (!c.accept(")")) {
    do {
      MilValueType t = c.type();
      m.params.emplace_back(c.word(), std::move(t));
    } while (c.accept(","));
    c.expect(")");
  }
}

}  // namespace

MilScan scan_mil(std::string_view text, const std::string& source) {
  MilScan m;
  int line_no = 0;
  bool in_function = false;
  for (size_t at = 0; at <= text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    Cursor c(text.substr(at, end - at), ++line_no, source);
    at = end + 1;
    c.skip_space();
    if (c.rest().empty()) continue;
    if (m.program_version.empty()) {
      c.expect("program");
      c.expect("(");
      m.program_version = c.word();
      c.expect(")");
    } else if (c.rest().starts_with("func")) {
      read_header(c, m);
      in_function = true;
    } else if (c.rest().starts_with("}")) {
      in_function = false;
    } else if (in_function) {
      m.statements.push_back(read_statement(c, line_no));
    }
  }
  if (m.program_version.empty()) throw_input_error(source, "no program(...) line", "program");
  if (m.function_target.empty()) throw_input_error(source, "no func line", "func");
  for (size_t i = 0; i < m.statements.size(); i++)
    for (const auto& [name, type] : m.statements[i].results) m.producer[name] = i;
  return m;
}

}  // namespace orion::runtime::anesim
