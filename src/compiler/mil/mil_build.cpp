// MIL parser, second stage: statements → IR graph.
//
// A const becomes an IR const when it is used as data (an operand or a returned value) or not at
// all; a const used only as an op parameter (axes, perm, strides, transpose flags, ...) becomes an
// attribute of each op that uses it, through the argument table of mil_syntax.h — the inverse of
// what emit_mil does, so emit → parse → emit is the identity on text.
#include <set>

#include <fmt/format.h>

#include "base/error.h"
#include "compiler/mil/mil_ast.h"

namespace orion::compiler::mil {
namespace {

constexpr int64_t kMaxElements = int64_t(1) << 40;

bool too_many_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) continue;  // −1 (inferred) and invalid dims are shape inference's to judge
    if (n > kMaxElements / d) return true;
    n *= d;
  }
  return false;
}

class Builder {
 public:
  Builder(const MilProgram& p, const std::string& source) : p_(p), src_(source) {}

  ir::Graph run() {
    ir::Graph g(p_.function_name);
    for (const auto& param : p_.params) {
      const MilType& t = param.first;    // plain references, not a structured binding: clang 14
      const Token& name = param.second;  // cannot capture bindings in a lambda (ORION_FUZZ builds)
      if (t.is_string) fail(name, "function parameters must be tensors, not strings");
      define(name);
      guarded(name, [&] { values_[name.text] = g.input(name.text, t.t); });
    }
    classify_consts();
    for (const MilStmt& s : p_.stmts) s.is_const ? add_const(g, s) : add_op(g, s);
    std::set<std::string> outs;
    for (const Token& r : p_.returns) {
      if (!outs.insert(r.text).second) fail(r, fmt::format("'{}' is returned twice", r.text));
      g.add_output(r.text, operand(r));
    }
    return g;
  }

 private:
  [[noreturn]] void fail(const Token& at, const std::string& msg, const std::string& hint = {}) const {
    parse_error(src_, at.line, at.col, msg, hint);
  }

  // Runs f, turning a graph-builder Error (bad shapes, duplicate names) into one at `at`.
  template <typename F>
  void guarded(const Token& at, F f) const {
    try {
      f();
    } catch (const Error& e) {
      fail(at, e.context().field.empty() ? e.message() : fmt::format("'{}': {}", e.context().field, e.message()),
           e.context().hint);
    }
  }

  void define(const Token& name) {
    if (!defined_.insert(name.text).second) fail(name, fmt::format("'{}' is defined twice", name.text));
  }

  // Which consts are data (IR consts) and which only op parameters (attributes).
  void classify_consts() {
    std::set<std::string> data_use, param_use;
    for (const MilStmt& s : p_.stmts) {
      if (s.is_const) continue;
      auto op = op_from_mil(s.op.text);
      if (!op) fail(s.op, fmt::format("unknown MIL op '{}'", s.op.text), "Orion reads the ops listed in ir/ops.def");
      for (const MilArg& a : s.args)
        for (const Token& id : a.ids) (is_parameter(spec(*op, s, a).kind) ? param_use : data_use).insert(id.text);
    }
    for (const Token& r : p_.returns) data_use.insert(r.text);
    for (const MilStmt& s : p_.stmts)
      if (s.is_const) {
        const std::string& n = s.results[0].second.text;
        if (param_use.count(n) && !data_use.count(n)) param_only_.insert(n);
      }
  }

  const ArgSpec& spec(ir::Op op, const MilStmt& s, const MilArg& a) const {
    std::vector<std::string> names;
    for (const ArgSpec& sp : mil_args(op)) {
      if (a.name.text == sp.mil) return sp;
      names.push_back(sp.mil);
    }
    fail(a.name, fmt::format("{} has no argument '{}' (expected: {})", s.op.text, a.name.text, fmt::join(names, ", ")));
  }

  void add_const(ir::Graph& g, const MilStmt& s) {
    const MilType& t = s.results[0].first;
    const Token& name = s.results[0].second;
    define(name);
    consts_[name.text] = &s;
    if (param_only_.count(name.text)) return;
    if (t.is_string) fail(name, fmt::format("string const '{}' can only be an op parameter", name.text));
    guarded(name, [&] { values_[name.text] = g.constant(name.text, t.t, s.data); });
  }

  ir::Value operand(const Token& id) const {
    auto it = values_.find(id.text);
    if (it != values_.end()) return it->second;
    if (consts_.count(id.text)) fail(id, fmt::format("'{}' is an op parameter and cannot be data", id.text));
    fail(id, fmt::format("undefined identifier '{}'", id.text), "values must be defined before they are used");
  }

  void add_op(ir::Graph& g, const MilStmt& s) {
    ir::Op op = *op_from_mil(s.op.text);
    std::vector<ir::Value> inputs;
    std::vector<bool> given;
    ir::Attrs attrs;
    std::set<std::string> seen;
    for (const MilArg& a : s.args) {
      const ArgSpec& sp = spec(op, s, a);
      if (!seen.insert(a.name.text).second) fail(a.name, fmt::format("argument '{}' is given twice", a.name.text));
      bool tuple = sp.kind == ArgKind::OperandTuple;
      if (tuple != a.tuple)
        fail(a.name, fmt::format("argument '{}' of {} takes {}", a.name.text, s.op.text,
                                 tuple ? "a tuple (a, b, ...)" : "one name"));
      if (tuple) {
        for (const Token& id : a.ids) inputs.push_back(operand(id));
      } else if (!is_parameter(sp.kind)) {
        if (inputs.size() <= size_t(sp.index)) inputs.resize(size_t(sp.index) + 1), given.resize(size_t(sp.index) + 1);
        inputs[size_t(sp.index)] = operand(a.ids[0]);
        given[size_t(sp.index)] = true;
      } else {
        decode_param(s, a, sp, attrs);
      }
    }
    for (const ArgSpec& sp : mil_args(op)) {
      bool missing = !seen.count(sp.mil);
      if (missing && (sp.kind == ArgKind::Operand || sp.kind == ArgKind::OperandTuple ||
                      ((sp.kind == ArgKind::AttrInt || sp.kind == ArgKind::AttrInts || sp.kind == ArgKind::AttrDType) &&
                       !sp.has_default)))
        fail(s.op, fmt::format("{} needs argument '{}'", s.op.text, sp.mil));
    }
    for (size_t i = 0; i < given.size(); i++)
      if (!given[i]) fail(s.op, fmt::format("{} is missing operand {}", s.op.text, i));
    std::string name = s.results.size() == 1 ? s.results[0].second.text : s.name_attr;
    if (name.empty()) name = g.fresh_name(s.op.text);
    for (const auto& r : s.results) define(r.second);
    ir::Value v;
    guarded(s.op, [&] { v = g.add_node(op, inputs, attrs, name); });
    check_results(g, s, v);
  }

  void check_results(const ir::Graph& g, const MilStmt& s, ir::Value v) {
    auto results = g.results_of(v);
    if (results.size() != s.results.size())
      fail(s.results[0].second,
           fmt::format("{} gives {} results, {} declared", s.op.text, results.size(), s.results.size()));
    for (size_t r = 0; r < results.size(); r++) {
      const auto& [t, name] = s.results[r];
      if (t.is_string || !(t.t == g.type(results[r])))
        fail(name, fmt::format("'{}' is declared {}, but {} gives {}", name.text, t.str(), s.op.text,
                               type_str(g.type(results[r]), false)));
      values_[name.text] = results[r];
    }
  }

  // The const named by a parameter argument, checked to be of the right kind.
  void decode_param(const MilStmt& s, const MilArg& a, const ArgSpec& sp, ir::Attrs& attrs) const {
    const Token& id = a.ids[0];
    auto it = consts_.find(id.text);
    if (it == consts_.end())
      fail(id, defined_.count(id.text) ? fmt::format("argument '{}' of {} must name a const", sp.mil, s.op.text)
                                       : fmt::format("undefined identifier '{}'", id.text));
    const MilStmt& c = *it->second;
    const MilType& t = c.results[0].first;
    auto want = [&](bool ok, const char* what) {
      if (!ok)
        fail(id, fmt::format("argument '{}' of {} must be {}, '{}' is {}", sp.mil, s.op.text, what, id.text, t.str()));
    };
    auto is = [&](ir::ElemType e, size_t rank) { return !t.is_string && t.t.elem == e && t.t.shape.size() == rank; };
    auto ints = [&] {
      std::vector<int64_t> v;
      for (int64_t i = 0; i < t.t.numel(); i++) v.push_back(int64_t(element_value(t.t.elem, c.data->bytes.data() + 4 * i)));
      return v;
    };
    auto must_equal = [&](bool ok, const std::string& value, const std::string& found) {
      if (!ok)
        fail(id, fmt::format("argument '{}' of {} must be {} (Orion supports no other), '{}' is {}", sp.mil, s.op.text,
                             value, id.text, found));
    };
    auto list = [](const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); };
    switch (sp.kind) {
      case ArgKind::AttrInt: want(is(ir::ElemType::I32, 0), "int32"), attrs[sp.attr] = ints()[0]; break;
      case ArgKind::AttrInts: {
        want(is(ir::ElemType::I32, 1), "tensor<int32, [n]>");
        std::vector<int64_t> v = ints();
        if (op_from_mil(s.op.text) == ir::Op::Reshape && too_many_elements(v))  // would overflow shape inference
          fail(id, fmt::format("'{}' asks for more than 2^40 elements", id.text));
        attrs[sp.attr] = std::move(v);
        break;
      }
      case ArgKind::AttrBool: want(is(ir::ElemType::Bool, 0), "bool"), attrs[sp.attr] = c.data->bytes[0] != 0; break;
      case ArgKind::AttrDType:
        want(t.is_string && ir::elem_from_name(c.str_value).has_value(), "a string naming fp16, fp32, int32 or bool");
        attrs[sp.attr] = c.str_value;
        break;
      case ArgKind::AttrElemLikeX:
        want(!t.is_string && t.t.shape.empty(), "a scalar");
        attrs[sp.attr] = element_value(t.t.elem, c.data->bytes.data());
        break;
      case ArgKind::FixedInt:
        want(is(ir::ElemType::I32, 0), "int32");
        must_equal(ints()[0] == sp.fixed[0], fmt::format("{}", sp.fixed[0]), fmt::format("{}", ints()[0]));
        break;
      case ArgKind::FixedInts:
        want(is(ir::ElemType::I32, 1), "tensor<int32, [n]>");
        must_equal(ints() == sp.fixed, list(sp.fixed), list(ints()));
        break;
      case ArgKind::FixedBool: {
        want(is(ir::ElemType::Bool, 0), "bool");
        bool v = c.data->bytes[0] != 0;
        must_equal(v == (sp.fixed[0] != 0), sp.fixed[0] ? "true" : "false", v ? "true" : "false");
        break;
      }
      case ArgKind::FixedString:
        want(t.is_string, "a string");
        must_equal(c.str_value == sp.text, fmt::format("\"{}\"", sp.text), fmt::format("\"{}\"", c.str_value));
        break;
      case ArgKind::Operand:
      case ArgKind::OptOperand:
      case ArgKind::OperandTuple: break;
    }
  }

  const MilProgram& p_;
  std::string src_;
  std::set<std::string> defined_;
  std::set<std::string> param_only_;
  std::map<std::string, ir::Value> values_;       // inputs, op results and IR consts
  std::map<std::string, const MilStmt*> consts_;  // every const defined so far
};

}  // namespace

ir::Graph build_graph(const MilProgram& p, const std::string& source) { return Builder(p, source).run(); }

}  // namespace orion::compiler::mil
