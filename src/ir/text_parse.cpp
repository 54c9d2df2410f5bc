// The IR text parser: a recursive-descent parser (over text_lexer.h's tokens) for the grammar in
// text.h. Nodes are built through the Graph builder, so shape inference checks every node as it is
// read; the result types written in the text must equal the inferred ones.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "base/dtype.h"
#include "base/error.h"
#include "base/hex.h"
#include "ir/text.h"
#include "ir/text_lexer.h"

namespace orion::ir {
namespace {

using text_detail::describe;
using text_detail::Lexer;
using text_detail::Tok;
using text_detail::Token;

std::string types_written(size_t n) { return n == 1 ? "1 type is" : fmt::format("{} types are", n); }

// ---------------------------------------------------------------------------------------------
// Parser: one method per grammar rule.

// Limits that keep a hostile text from asking for absurd allocations.
constexpr int64_t kMaxElements = int64_t(1) << 40;
constexpr size_t kMaxConstBytes = size_t(1) << 30;

struct ConstSpelling {
  Token token;  // the dense string or the splat scalar
  bool splat = false;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : lex_(text, source) {}

  Graph parse() {
    skip_newlines();
    expect_word("graph", "'graph' at the start");
    Token name = lex_.next();
    if (name.kind != Tok::Ident && name.kind != Tok::String) fail(name, "a graph name");
    g_ = Graph(name.text);
    expect_punct("{", "'{' after the graph name");
    expect_newline();
    for (;;) {
      skip_newlines();
      const Token& t = lex_.peek();
      if (t.kind == Tok::Ident && t.text == "return") break;
      if (t.kind != Tok::ValueName) fail(t, "a node ('%name = ...') or 'return'");
      parse_node();
    }
    parse_return();
    skip_newlines();
    expect_punct("}", "'}' after the return line");
    skip_newlines();
    if (lex_.peek().kind != Tok::End) fail(lex_.peek(), "end of input after '}'");
    if (std::string problem = g_.verify(); !problem.empty()) error_at(lex_.peek(), problem);
    return std::move(g_);
  }

 private:
  [[noreturn]] void error_at(const Token& t, const std::string& msg) const { lex_.fail(t.line, t.col, msg); }
  [[noreturn]] void fail(const Token& got, const std::string& expected) const {
    error_at(got, fmt::format("expected {}, got {}", expected, describe(got)));
  }
  void skip_newlines() {
    while (lex_.peek().kind == Tok::Newline) lex_.next();
  }
  bool at_punct(const char* p) { return lex_.peek().kind == Tok::Punct && lex_.peek().text == p; }
  Token expect_punct(const char* p, const std::string& what) {
    if (!at_punct(p)) fail(lex_.peek(), what);
    return lex_.next();
  }
  void expect_word(const char* w, const std::string& what) {
    if (lex_.peek().kind != Tok::Ident || lex_.peek().text != w) fail(lex_.peek(), what);
    lex_.next();
  }
  void expect_newline() {
    if (lex_.peek().kind != Tok::Newline && lex_.peek().kind != Tok::End) fail(lex_.peek(), "end of line");
    lex_.next();
  }

  int64_t parse_int(const std::string& what) {
    Token t = lex_.next();
    int64_t v = 0;
    const char* end = t.text.data() + t.text.size();
    if (t.kind != Tok::Number) fail(t, what);
    auto r = std::from_chars(t.text.data(), end, v);
    if (r.ec == std::errc::result_out_of_range) error_at(t, fmt::format("integer {} is out of range", t.text));
    if (r.ec != std::errc() || r.ptr != end) fail(t, what);
    return v;
  }

  std::vector<int64_t> parse_int_list(const std::string& what) {
    expect_punct("[", "'[' to start " + what);
    std::vector<int64_t> v;
    if (at_punct("]")) return lex_.next(), v;
    for (;;) {
      v.push_back(parse_int("an integer in " + what));
      if (at_punct("]")) return lex_.next(), v;
      expect_punct(",", "',' or ']' in " + what);
    }
  }

  Type parse_type() {
    Token t = lex_.next();
    if (t.kind != Tok::Ident) fail(t, "a type like fp16[1, 64, 1, 16]");
    auto elem = elem_from_name(t.text);
    if (!elem) error_at(t, fmt::format("unknown element type '{}' (expected fp16, fp32, int32 or bool)", t.text));
    Type type{*elem, parse_int_list("the shape")};
    int64_t numel = 1;
    for (int64_t d : type.shape) {
      if (d < 0) error_at(t, fmt::format("shape {} has a negative dimension", type.str()));
      if (d > 0 && numel > kMaxElements / d) error_at(t, fmt::format("shape {} has too many elements", type.str()));
      numel *= d;
    }
    return type;
  }

  Value parse_value() {
    Token t = lex_.next();
    if (t.kind != Tok::ValueName || t.quoted) fail(t, "a value ('%name' or '%name#i')");
    int node = g_.find(t.text);
    if (node < 0) error_at(t, fmt::format("'%{}' is not defined", t.text));
    size_t nres = g_.node(node).results.size();
    if (!at_punct("#")) {
      if (nres != 1) error_at(t, fmt::format("'%{}' has {} results: pick one with '%{}#i'", t.text, nres, t.text));
      return {node, 0};
    }
    lex_.next();
    Token it = lex_.peek();
    int64_t i = parse_int("a result number after '#'");
    if (nres == 1) error_at(it, fmt::format("'%{}' has one result: write '%{}'", t.text, t.text));
    if (i < 0 || i >= int64_t(nres)) error_at(it, fmt::format("'%{}' has no result #{} (it has {})", t.text, i, nres));
    return {node, int(i)};
  }

  AttrValue parse_attr_value() {
    if (at_punct("[")) return parse_int_list("the integer list");
    Token v = lex_.next();
    if (v.kind == Tok::String) return v.text;
    if (v.kind == Tok::Ident && (v.text == "true" || v.text == "false")) return v.text == "true";
    if (auto f = as_float(v, false)) return *f;
    if (v.kind == Tok::Number) {
      int64_t i = 0;
      auto r = std::from_chars(v.text.data(), v.text.data() + v.text.size(), i);
      if (r.ec == std::errc::result_out_of_range) error_at(v, fmt::format("integer {} is out of range", v.text));
      if (r.ec == std::errc() && r.ptr == v.text.data() + v.text.size()) return i;
    }
    fail(v, "an attribute value (true, false, a number, a string or [integers])");
  }

  // A float spelled with '.', an exponent, or inf/nan; with allow_int, plain integers too.
  std::optional<double> as_float(const Token& t, bool allow_int) {
    std::string s = t.text;
    bool special = s == "inf" || s == "-inf" || s == "nan" || s == "-nan";
    if (t.kind == Tok::Ident && !special) return std::nullopt;
    if (t.kind != Tok::Number && t.kind != Tok::Ident) return std::nullopt;
    if (!special && !allow_int && s.find_first_of(".eE") == std::string::npos) return std::nullopt;
    if (s.find("nan") != std::string::npos) return s[0] == '-' ? -NAN : NAN;
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return std::nullopt;
    return d;
  }

  Attrs parse_attrs() {
    Attrs attrs;
    expect_punct("{", "'{'");
    for (;;) {
      Token key = lex_.next();
      if (key.kind != Tok::Ident) fail(key, "an attribute name");
      expect_punct("=", fmt::format("'=' after attribute '{}'", key.text));
      AttrValue v = parse_attr_value();
      if (!attrs.emplace(key.text, std::move(v)).second)
        error_at(key, fmt::format("attribute '{}' is given twice", key.text));
      if (at_punct("}")) return lex_.next(), attrs;
      expect_punct(",", "',' or '}' in the attributes");
    }
  }

  ConstSpelling parse_const_spelling() {
    Token kind = lex_.next();
    if (kind.kind == Tok::Ident && kind.text == "blob")
      error_at(kind, "elided constant data (blob<...>) cannot be parsed: print the graph without elide_constants_above");
    if (kind.kind != Tok::Ident || (kind.text != "dense" && kind.text != "splat"))
      fail(kind, "constant data (dense<\"0x...\"> or splat<value>)");
    expect_punct("<", fmt::format("'<' after '{}'", kind.text));
    ConstSpelling c{lex_.next(), kind.text == "splat"};
    if (!c.splat && c.token.kind != Tok::String) fail(c.token, "a string of hex bytes (\"0x...\")");
    if (c.splat && c.token.kind != Tok::Number && c.token.kind != Tok::Ident) fail(c.token, "a scalar value");
    expect_punct(">", fmt::format("'>' to close '{}<'", kind.text));
    return c;
  }

  std::shared_ptr<ConstData> const_data(const ConstSpelling& c, const Type& type, const std::string& name);
  std::vector<uint8_t> splat_element(const Token& t, ElemType elem);
  void parse_node();
  void parse_return();

  Lexer lex_;
  Graph g_;
};

std::vector<uint8_t> Parser::splat_element(const Token& t, ElemType elem) {
  std::vector<uint8_t> e(elem_size(elem));
  auto bad = [&]() { error_at(t, fmt::format("splat value {} is not a valid {}", describe(t), elem_name(elem))); };
  switch (elem) {
    case ElemType::F16:
    case ElemType::F32: {
      auto d = as_float(t, true);
      if (!d) bad();
      float f = float(*d);
      if (elem == ElemType::F32) std::memcpy(e.data(), &f, 4);
      else {
        uint16_t h = f32_to_f16(f);
        std::memcpy(e.data(), &h, 2);
      }
      break;
    }
    case ElemType::I32: {
      int32_t i = 0;
      auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), i);
      if (t.kind != Tok::Number || r.ec != std::errc() || r.ptr != t.text.data() + t.text.size()) bad();
      std::memcpy(e.data(), &i, 4);
      break;
    }
    case ElemType::Bool:
      if (t.kind != Tok::Ident || (t.text != "true" && t.text != "false")) bad();
      e[0] = t.text == "true";
      break;
  }
  return e;
}

std::shared_ptr<ConstData> Parser::const_data(const ConstSpelling& c, const Type& type, const std::string& name) {
  auto data = std::make_shared<ConstData>();
  if (type.bytes() > kMaxConstBytes)
    error_at(c.token, fmt::format("constant '{}' of type {} is larger than 1 GiB", name, type.str()));
  if (c.splat) {
    // One element, then the filled part copied onto the rest, doubling each time: a splat of up to
    // 1 GiB fills in ~30 copies instead of one call per element (a 32 MiB splat took > 10 s under
    // the sanitizers, found by fuzz_ir_text).
    std::vector<uint8_t> e = splat_element(c.token, type.elem);
    const size_t total = size_t(type.numel()) * e.size();
    data->bytes.resize(total);
    if (total == 0) return data;
    std::memcpy(data->bytes.data(), e.data(), e.size());
    for (size_t filled = e.size(); filled < total; filled *= 2)
      std::memcpy(data->bytes.data() + filled, data->bytes.data(), std::min(filled, total - filled));
    return data;
  }
  const std::string& hex = c.token.text;
  if (hex.rfind("0x", 0) != 0) error_at(c.token, "dense data must start with 0x");
  if (hex.size() % 2) error_at(c.token, "dense data has an odd number of hex digits");
  // Two digits a byte (hex_digit), not a substring and std::stoi per byte: a 32 MiB constant printed
  // as dense (a splat of NaN) took > 10 s to parse again under the sanitizers, found by fuzz_ir_text.
  data->bytes.resize((hex.size() - 2) / 2);
  for (size_t i = 2; i < hex.size(); i += 2) {
    const int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) error_at(c.token, fmt::format("dense data has a non-hex character at digit {}", i - 1));
    data->bytes[(i - 2) / 2] = uint8_t(hi << 4 | lo);
  }
  if (data->bytes.size() != type.bytes())
    error_at(c.token, fmt::format("constant '{}' of type {} needs {} bytes, dense data has {}", name, type.str(),
                                  type.bytes(), data->bytes.size()));
  return data;
}

void Parser::parse_node() {
  Token name = lex_.next();
  if (name.quoted) fail(name, "a node name");
  if (g_.find(name.text) >= 0) error_at(name, fmt::format("'%{}' is already defined", name.text));
  int64_t declared = 1;
  if (at_punct(":")) {
    lex_.next();
    Token n = lex_.peek();
    declared = parse_int("a result count after ':'");
    if (declared < 2) error_at(n, "a result count must be at least 2 (write '%name' for one result)");
  }
  expect_punct("=", fmt::format("'=' after '%{}'", name.text));
  Token op_tok = lex_.next();
  std::optional<Op> op = op_tok.kind == Tok::Ident ? op_from_name(op_tok.text) : std::nullopt;
  if (op_tok.kind != Tok::Ident) fail(op_tok, "an op name");
  if (!op) error_at(op_tok, fmt::format("unknown op '{}'", op_tok.text));
  std::optional<ConstSpelling> spelling;
  std::vector<Value> inputs;
  if (*op == Op::Const) spelling = parse_const_spelling();
  if (*op != Op::Input && *op != Op::Const) {
    expect_punct("(", fmt::format("'(' after '{}'", op_tok.text));
    while (!at_punct(")")) {
      if (!inputs.empty()) expect_punct(",", "',' or ')' in the operands");
      inputs.push_back(parse_value());
    }
    lex_.next();
  }
  Attrs attrs = at_punct("{") ? parse_attrs() : Attrs{};
  expect_punct(":", "':' and the result types");
  std::vector<std::pair<Token, Type>> types;
  do {
    Token at = lex_.peek();
    types.emplace_back(at, parse_type());
  } while (at_punct(",") && (lex_.next(), true));
  expect_newline();
  if (int64_t(types.size()) != declared)
    error_at(types[0].first, declared == 1 ? fmt::format("node '{}' has {} result types: declare them with '%{}:{}'",
                                                         name.text, types.size(), name.text, types.size())
                                           : fmt::format("node '{}' declares {} results but {} written", name.text, declared,
                                                         types_written(types.size())));

  if (*op == Op::Input || *op == Op::Const) {
    if (types.size() != 1) error_at(types[1].first, fmt::format("'{}' has exactly one result", op_tok.text));
    const Type& t = types[0].second;
    Value v = *op == Op::Input ? g_.input(name.text, t) : g_.constant(name.text, t, const_data(*spelling, t, name.text));
    g_.node_mut(v.node).attrs = std::move(attrs);
    return;
  }
  Value v;
  try {
    v = g_.add_node(*op, std::move(inputs), std::move(attrs), name.text);
  } catch (const Error& e) {
    error_at(op_tok, fmt::format("node '{}': {}", name.text, e.message()));
  }
  const std::vector<Type>& inferred = g_.node(v).results;
  if (inferred.size() != types.size())
    error_at(types[0].first, fmt::format("node '{}' has {} results but {} written", name.text, inferred.size(),
                                         types_written(types.size())));
  for (size_t i = 0; i < types.size(); i++)
    if (types[i].second != inferred[i])
      error_at(types[i].first, fmt::format("node '{}': result type is written {} but shape inference gives {}", name.text,
                                           types[i].second.str(), inferred[i].str()));
}

void Parser::parse_return() {
  lex_.next();  // 'return'
  std::set<std::string> seen;
  while (lex_.peek().kind != Tok::Newline && lex_.peek().kind != Tok::End) {
    if (!seen.empty()) expect_punct(",", "',' or end of line after an output");
    Token name = lex_.next();
    if (name.kind != Tok::ValueName) fail(name, "an output ('%name = %value')");
    if (!seen.insert(name.text).second) error_at(name, fmt::format("output '{}' is given twice", name.text));
    expect_punct("=", fmt::format("'=' after output '%{}'", name.text));
    g_.add_output(name.text, parse_value());
  }
  expect_newline();
}

}  // namespace

Graph parse_graph(std::string_view text, const std::string& source_name) { return Parser(text, source_name).parse(); }

}  // namespace orion::ir
