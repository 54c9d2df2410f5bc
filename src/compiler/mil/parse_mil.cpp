// MIL parser, first stage (see parse_mil.h): tokens → statements, with const values decoded and
// BLOBFILEs resolved; mil_build.cpp makes the graph.
#include "compiler/mil/parse_mil.h"

#include <memory>

#include <fmt/format.h>

#include "base/error.h"
#include "compiler/blob/blob_file.h"
#include "compiler/mil/mil_ast.h"

namespace orion::compiler {
namespace {

using mil::MilArg;
using mil::MilProgram;
using mil::MilStmt;
using mil::MilType;
using mil::Token;
using TK = Token::Kind;

constexpr int kMaxRank = 8;
constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;
constexpr int64_t kMaxElements = int64_t(1) << 40;

class Parser {
 public:
  Parser(std::string_view text, const WeightDict& weights, const std::string& source)
      : toks_(mil::tokenize(text, source)), weights_(weights), src_(source) {}

  MilProgram run() {
    header();
    return std::move(p_);
  }

 private:
  // ---- tokens ----
  const Token& peek() const { return toks_[pos_]; }
  Token take() { return pos_ + 1 < toks_.size() ? toks_[pos_++] : toks_[pos_]; }
  bool is(const char* punct) const { return peek().kind == TK::Punct && peek().text == punct; }
  bool accept(const char* punct) { return is(punct) ? (take(), true) : false; }
  [[noreturn]] void fail(const Token& at, const std::string& msg, const std::string& hint = {}) const {
    mil::parse_error(src_, at.line, at.col, msg, hint);
  }
  void expect(const char* punct) {
    if (!accept(punct)) fail(peek(), fmt::format("expected '{}', found {}", punct, mil::describe(peek())));
  }
  Token expect_kind(TK kind, const char* what) {
    if (peek().kind != kind) fail(peek(), fmt::format("expected {}, found {}", what, mil::describe(peek())));
    return take();
  }
  Token expect_ident(const char* what) { return expect_kind(TK::Ident, what); }
  void expect_word(const char* word) {
    if (peek().kind != TK::Ident || peek().text != word)
      fail(peek(), fmt::format("expected '{}', found {}", word, mil::describe(peek())));
    take();
  }
  uint64_t unsigned_number(const char* what, uint64_t max) {
    Token t = expect_kind(TK::Number, what);
    uint64_t v = 0;
    for (char c : t.text) {
      if (c < '0' || c > '9') fail(t, fmt::format("expected {}, found {}", what, mil::describe(t)));
      if (v > (max - uint64_t(c - '0')) / 10) fail(t, fmt::format("{} {} is too large (at most {})", what, t.text, max));
      v = v * 10 + uint64_t(c - '0');
    }
    return v;
  }

  // ---- program(1.3) [buildInfo = ...] { func main<ios18>(...) { ... } -> (...); } ----
  void header() {
    expect_word("program");
    expect("(");
    p_.version = expect_kind(TK::Number, "a program version such as 1.3").text;
    expect(")");
    if (accept("[")) build_info();
    expect("{");
    expect_word("func");
    p_.function_name = expect_ident("a function name").text;
    expect("<");
    p_.target = expect_ident("a function target such as ios18").text;
    expect(">");
    expect("(");
    if (!is(")")) do {
        MilType t = type();
        p_.params.push_back({t, expect_ident("a parameter name")});
      } while (accept(","));
    expect(")");
    expect("{");
    while (!is("}") && peek().kind != TK::End) p_.stmts.push_back(statement());
    expect("}");
    expect("->");
    expect("(");
    do p_.returns.push_back(expect_ident("the name of a returned value"));
    while (accept(","));
    expect(")");
    expect(";");
    if (!accept("}"))
      fail(peek(), fmt::format("expected '}}' closing the program (one function only), found {}", mil::describe(peek())));
    if (peek().kind != TK::End) fail(peek(), fmt::format("expected end of input, found {}", mil::describe(peek())));
  }

  // [buildInfo = dict<string, string>({{"k", "v"}, ...})] — read and checked, not kept.
  void build_info() {
    expect_ident("an attribute name such as buildInfo");
    expect("=");
    expect_word("dict");
    expect("<");
    type();
    expect(",");
    type();
    expect(">");
    expect("(");
    expect("{");
    if (!is("}")) do {
        expect("{");
        expect_kind(TK::String, "a string key");
        expect(",");
        expect_kind(TK::String, "a string value");
        expect("}");
      } while (accept(","));
    expect("}");
    expect(")");
    expect("]");
  }

  // fp16 | string | tensor<fp16, [1, 768, 1, 64]>
  MilType type() {
    Token t = expect_ident("a type such as tensor<fp16, [1, 768, 1, 64]>");
    MilType m;
    if (t.text == "string") return {true, {}};
    if (t.text != "tensor") {
      m.t.elem = elem(t);
      return m;
    }
    expect("<");
    m.t.elem = elem(expect_ident("an element type"));
    expect(",");
    expect("[");
    int64_t numel = 1;
    if (!is("]")) do {
        Token d = peek();
        int64_t v = int64_t(unsigned_number("a dimension", uint64_t(kMaxDim)));
        if (v < 1) fail(d, "dimensions must be positive");
        if (m.t.shape.size() == size_t(kMaxRank)) fail(d, fmt::format("rank above {} is not supported", kMaxRank));
        if (numel > kMaxElements / v) fail(d, "tensor has more than 2^40 elements");
        numel *= v;
        m.t.shape.push_back(v);
      } while (accept(","));
    expect("]");
    expect(">");
    return m;
  }

  ir::ElemType elem(const Token& t) {
    auto e = ir::elem_from_name(t.text);
    if (!e) fail(t, fmt::format("unsupported element type {} (Orion's IR has fp16, fp32, int32, bool)", mil::describe(t)));
    return *e;
  }

  // T a[, T b] = op(args)[attrs];
  MilStmt statement() {
    MilStmt s;
    do {
      MilType t = type();
      s.results.push_back({t, expect_ident("a value name")});
    } while (accept(","));
    expect("=");
    s.op = expect_ident("an op name");
    expect("(");
    if (s.op.text == "const") {
      s.is_const = true;
      expect(")");
      if (s.results.size() != 1) fail(s.op, "const defines exactly one value");
      const_attrs(s);
    } else {
      op_args(s);
      if (accept("[")) {
        do {
          Token key = expect_ident("an attribute name");
          if (key.text != "name") fail(key, fmt::format("unknown op attribute {} (expected name)", mil::describe(key)));
          expect("=");
          s.name_attr = string_literal();
        } while (accept(","));
        expect("]");
      }
    }
    expect(";");
    return s;
  }

  // x = a, values = (a, b), ...)
  void op_args(MilStmt& s) {
    if (accept(")")) return;
    do {
      MilArg a;
      a.name = expect_ident("an argument name");
      expect("=");
      if (accept("(")) {
        a.tuple = true;
        do a.ids.push_back(expect_ident("a value name"));
        while (accept(","));
        expect(")");
      } else {
        a.ids.push_back(expect_ident("a value name (MIL operands are named values, C3)"));
      }
      s.args.push_back(std::move(a));
    } while (accept(","));
    expect(")");
  }

  std::string string_literal() {
    expect_word("string");
    expect("(");
    std::string v = expect_kind(TK::String, "a string").text;
    expect(")");
    return v;
  }

  // [name = string("n"), val = LITERAL]
  void const_attrs(MilStmt& s) {
    expect("[");
    bool has_val = false;
    do {
      Token key = expect_ident("name or val");
      expect("=");
      if (key.text == "name") {
        s.name_attr = string_literal();
      } else if (key.text == "val") {
        const_value(s);
        has_val = true;
      } else {
        fail(key, fmt::format("unknown const attribute {} (expected name or val)", mil::describe(key)));
      }
    } while (accept(","));
    expect("]");
    if (!has_val) fail(s.results[0].second, fmt::format("const '{}' has no val", s.results[0].second.text));
  }

  // string("x") | fp16(0.5) | tensor<fp16, []>(0.5) | tensor<int32, [2]>([1, 1]) | tensor<...>(BLOBFILE(...))
  void const_value(MilStmt& s) {
    const MilType& decl = s.results[0].first;
    Token at = peek();
    if (at.kind == TK::Ident && at.text == "string") {
      s.str_value = string_literal();
      if (!decl.is_string) fail(at, fmt::format("value is a string, the const is declared {}", decl.str()));
      return;
    }
    MilType vt = type();
    if (vt.is_string || decl.is_string || !(vt.t == decl.t))
      fail(at, fmt::format("value type {} differs from the declared type {}", vt.str(), decl.str()));
    expect("(");
    s.data = std::make_shared<ir::ConstData>();
    if (peek().kind == TK::Ident && peek().text == "BLOBFILE") {
      blob_value(vt.t, *s.data);
    } else if (accept("[")) {
      list_value(vt.t, *s.data);
    } else {
      if (!vt.t.shape.empty()) fail(peek(), fmt::format("expected '[' starting the values of {}", vt.str()));
      element(vt.t.elem, *s.data);
    }
    expect(")");
  }

  void element(ir::ElemType e, ir::ConstData& d) {
    Token t = take();
    size_t n = d.bytes.size();
    d.bytes.resize(n + ir::elem_size(e));
    if ((t.kind != TK::Number && t.kind != TK::Ident) || !mil::parse_element(e, t.text, d.bytes.data() + n))
      fail(t, fmt::format("expected {} value, found {}", ir::elem_name(e), mil::describe(t)));
  }

  void list_value(const ir::Type& t, ir::ConstData& d) {
    int64_t count = 0;
    if (!is("]")) do {
        if (count == t.numel()) fail(peek(), fmt::format("more values than {} holds ({})", mil::type_str(t, false), count));
        element(t.elem, d);
        count++;
      } while (accept(","));
    if (count != t.numel())
      fail(peek(), fmt::format("{} needs {} values, found {}", mil::type_str(t, false), t.numel(), count));
    expect("]");
  }

  // BLOBFILE(path = string("@model_path/weights/w.bin"), offset = uint64(64))
  void blob_value(const ir::Type& t, ir::ConstData& d) {
    Token at = take();
    expect("(");
    std::string path;
    Token off_tok;
    uint64_t offset = 0;
    bool has_path = false, has_offset = false;
    do {
      Token key = expect_ident("path or offset");
      expect("=");
      if (key.text == "path") {
        path = string_literal(), has_path = true;
      } else if (key.text == "offset") {
        expect_word("uint64");
        expect("(");
        off_tok = peek();
        offset = unsigned_number("an offset", UINT64_MAX);
        expect(")");
        has_offset = true;
      } else {
        fail(key, fmt::format("unknown BLOBFILE argument {} (expected path, offset)", mil::describe(key)));
      }
    } while (accept(","));
    expect(")");
    if (!has_path || !has_offset) fail(at, "BLOBFILE needs both path and offset");
    const blob::BlobFile& file = blob_file(path, at);
    const blob::BlobEntry* e = nullptr;
    try {
      e = &file.at(offset);
    } catch (const Error& err) {
      fail(off_tok, err.what(), err.context().hint);
    }
    auto want = blob::blob_dtype_of(t.elem);
    if (!want) fail(at, "bool constants cannot be stored as BLOBFILE");
    if (e->dtype != *want)
      fail(off_tok, fmt::format("blob at offset {} of '{}' holds {}, the const is {}", offset, path,
                                blob::blob_dtype_name(e->dtype), ir::elem_name(t.elem)));
    if (e->size != t.bytes())
      fail(off_tok, fmt::format("blob at offset {} of '{}' has {} bytes, {} needs {}", offset, path, e->size,
                                mil::type_str(t, false), t.bytes()));
    d.bytes = file.copy(*e);
  }

  const blob::BlobFile& blob_file(const std::string& path, const Token& at) {
    if (auto it = blobs_.find(path); it != blobs_.end()) return *it->second;
    auto w = weights_.find(path);
    if (w == weights_.end()) {
      std::string keys;
      for (const auto& [k, v] : weights_) keys += (keys.empty() ? "" : ", ") + k;
      fail(at, fmt::format("weight file '{}' is not in the weight dictionary", path),
           keys.empty() ? "the weight dictionary is empty" : "it holds: " + keys);
    }
    try {
      return *(blobs_[path] = std::make_unique<blob::BlobFile>(w->second, path));
    } catch (const Error& err) {
      fail(at, err.what(), err.context().hint);
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  const WeightDict& weights_;
  std::string src_;
  std::map<std::string, std::unique_ptr<blob::BlobFile>> blobs_;
  MilProgram p_;
};

}  // namespace

ParsedMil parse_mil_program(std::string_view text, const WeightDict& weights, const std::string& source_name) {
  MilProgram p = Parser(text, weights, source_name).run();
  ParsedMil out{mil::build_graph(p, source_name), p.version, p.function_name, p.target};
  return out;
}

ir::Graph parse_mil(std::string_view text, const WeightDict& weights, const std::string& source_name) {
  return parse_mil_program(text, weights, source_name).graph;
}

}  // namespace orion::compiler
