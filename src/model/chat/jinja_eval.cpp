// Rendering: walks the syntax tree with a stack of scopes. The bottom scope holds the globals and
// the template's top-level `set`s; each for-loop iteration pushes one (so a `set` inside a loop does
// not leak out, which is why templates use namespace()); a macro call runs over the bottom scope
// plus its parameters.
#include <cstdint>
#include <unordered_map>

#include "base/error.h"
#include "model/chat/jinja.h"
#include "model/chat/jinja_builtins.h"

namespace orion::jinja {
namespace {

enum class Flow { Normal, Break, Continue };

class Evaluator {
 public:
  Evaluator(const std::string& name, const std::string& source, const Dict& vars) : name_(name), source_(source) {
    scopes_.emplace_back();
    auto& g = scopes_[0];
    g["namespace"] = Value(Function([](CallArgs& a) {
      Dict d;
      if (!a.args.empty() && a.args[0].is_dict()) d = a.args[0].as_dict();
      for (auto& [k, v] : a.kwargs) d.emplace_back(k, v);
      return Value(std::move(d));
    }));
    g["raise_exception"] = Value(Function([](CallArgs& a) -> Value { throw EvalError{a.get(0, "message").str()}; }));
    g["range"] = Value(Function([](CallArgs& a) {
      int64_t start = 0, stop = 0, step = 1;
      if (a.args.size() == 1) stop = a.args[0].as_int();
      if (a.args.size() >= 2) start = a.args[0].as_int(), stop = a.args[1].as_int();
      if (a.args.size() >= 3) step = a.args[2].as_int();
      if (step == 0) throw EvalError{"range() arg 3 must not be zero"};
      if ((double(stop) - double(start)) / double(step) > double(1 << 20)) throw EvalError{"range() too long for a template"};
      List l;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) l.emplace_back(i);
      return Value(std::move(l));
    }));
    for (const auto& [k, v] : vars) g[k] = v;
  }

  std::string render(const Body& body) {
    exec(body);
    return std::move(out_);
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  [[noreturn]] void fail(size_t at, const std::string& msg) const { throw_template_error(name_, source_, at, msg); }

  Value lookup(const std::string& n) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(n);
      if (f != it->end()) return f->second;
    }
    return Value();
  }

  Flow exec(const Body& body) {
    for (const NodePtr& n : body) {
      const Flow f = exec(*n);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Node& n) {
    switch (n.kind) {
      case Node::Kind::Text: out_ += n.text; return Flow::Normal;
      case Node::Kind::Output: out_ += eval(*n.expr).str(); return Flow::Normal;
      case Node::Kind::If:
        for (const auto& [cond, body] : n.branches)
          if (eval(*cond).truthy()) return exec(body);
        return exec(n.else_body);
      case Node::Kind::For: return exec_for(n);
      case Node::Kind::Set: exec_set(n); return Flow::Normal;
      case Node::Kind::Break: return Flow::Break;
      case Node::Kind::Continue: return Flow::Continue;
      case Node::Kind::Macro: scopes_.back()[n.targets[0]] = macro(n); return Flow::Normal;
    }
    return Flow::Normal;
  }

  Flow exec_for(const Node& n) {
    const Value seq = eval(*n.expr);
    List items;
    try {
      items = iterate(seq);
    } catch (const EvalError& e) {
      fail(n.expr->offset, e.message);
    }
    if (n.cond) {  // `for x in xs if c`: the filter runs before loop.length is known
      List kept;
      for (const Value& item : items) {
        scopes_.emplace_back();
        bind_targets(n, item);
        if (eval(*n.cond).truthy()) kept.push_back(item);
        scopes_.pop_back();
      }
      items = std::move(kept);
    }
    const int64_t len = int64_t(items.size());
    for (int64_t i = 0; i < len; i++) {
      // Bounded work: nested loops over long lists would otherwise run for hours.
      if (++iterations_ > kMaxIterations) fail(n.offset, "more than 2^20 loop iterations: the template does not end");
      scopes_.emplace_back();
      bind_targets(n, items[size_t(i)]);
      scopes_.back()["loop"] = Value(Dict{{"index", Value(i + 1)},
                                          {"index0", Value(i)},
                                          {"revindex", Value(len - i)},
                                          {"revindex0", Value(len - i - 1)},
                                          {"first", Value(i == 0)},
                                          {"last", Value(i == len - 1)},
                                          {"length", Value(len)},
                                          {"previtem", i > 0 ? items[size_t(i - 1)] : Value()},
                                          {"nextitem", i + 1 < len ? items[size_t(i + 1)] : Value()}});
      const Flow f = exec(n.body);
      scopes_.pop_back();
      if (f == Flow::Break) break;
    }
    if (len == 0) return exec(n.else_body);
    return Flow::Normal;
  }

  void bind_targets(const Node& n, const Value& item) {
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = item;
      return;
    }
    if (!item.is_list() || item.as_list().size() != n.targets.size())
      fail(n.offset, fmt::format("cannot unpack {} into {} loop variables", item.repr(), n.targets.size()));
    for (size_t t = 0; t < n.targets.size(); t++) scopes_.back()[n.targets[t]] = item.as_list()[t];
  }

  void exec_set(const Node& n) {
    Value v;
    if (n.expr) {
      v = eval(*n.expr);
    } else {  // {% set x %}…{% endset %}: the rendered body
      std::string saved = std::move(out_);
      out_.clear();
      exec(n.body);
      v = Value(std::move(out_));
      out_ = std::move(saved);
    }
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = v;
      return;
    }
    const Value ns = lookup(n.targets[0]);
    if (!ns.is_dict()) fail(n.offset, "cannot assign attribute on non-namespace object '" + n.targets[0] + "'");
    for (auto& [k, e] : ns.as_dict())
      if (k == n.targets[1]) {
        e = v;
        return;
      }
    ns.as_dict().emplace_back(n.targets[1], v);
  }

  // A macro as a function: its parameters bound from the call (defaults evaluated at the call),
  // its body rendered over the template's top-level scope.
  Value macro(const Node& n) {
    return Value(Function([this, &n](CallArgs& a) {
      if (macro_depth_ >= 100) throw EvalError{"macro calls nested too deeply (a macro calling itself without end?)"};
      macro_depth_++;
      Scope params;
      for (size_t i = 0; i < n.params.size(); i++) {
        Value v = a.get(i, n.params[i].first);
        if (v.is_undefined() && n.params[i].second) v = eval(*n.params[i].second);
        params[n.params[i].first] = v;
      }
      std::vector<Scope> saved = std::move(scopes_);
      scopes_ = {saved[0], std::move(params)};
      std::string out = std::move(out_);
      out_.clear();
      exec(n.body);
      std::swap(out, out_);
      scopes_ = std::move(saved);
      macro_depth_--;
      return Value(std::move(out));
    }));
  }

  // Errors from the builtins get the line and column of the innermost expression that raised them.
  Value eval(const Expr& e) {
    try {
      return eval_inner(e);
    } catch (const EvalError& x) {
      fail(e.offset, x.message);
    }
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs a;
    const size_t n_pos = e.kids.size() - first - e.kw_names.size();
    for (size_t i = first; i < e.kids.size(); i++) {
      Value v = eval(*e.kids[i]);
      if (i - first < n_pos) a.args.push_back(std::move(v));
      else a.kwargs.emplace_back(e.kw_names[i - first - n_pos], std::move(v));
    }
    return a;
  }

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: return lookup(e.name);
      case Expr::Kind::List: {
        List l;
        for (const ExprPtr& k : e.kids) l.push_back(eval(*k));
        return e.name == "tuple" ? Value::tuple(std::move(l)) : Value(std::move(l));
      }
      case Expr::Kind::Dict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.kids.size(); i += 2) d.emplace_back(eval(*e.kids[i]).str(), eval(*e.kids[i + 1]));
        return Value(std::move(d));
      }
      case Expr::Kind::Attr: return get_attr(eval(*e.kids[0]), e.name);
      case Expr::Kind::Index: return get_item(eval(*e.kids[0]), eval(*e.kids[1]));
      case Expr::Kind::Slice: {
        auto bound = [&](int i) { return e.kids[size_t(i)] ? eval(*e.kids[size_t(i)]) : Value(); };
        return get_slice(eval(*e.kids[0]), bound(1), bound(2), bound(3));
      }
      case Expr::Kind::Call: return eval_call(e);
      case Expr::Kind::Filter: {
        const Value v = eval(*e.kids[0]);
        CallArgs a = eval_args(e, 1);
        return apply_filter(e.name, v, a);
      }
      case Expr::Kind::Test: {
        const Value v = eval(*e.kids[0]);
        CallArgs a = eval_args(e, 1);
        return Value(apply_test(e.name, v, a) != e.negate);
      }
      case Expr::Kind::Unary: {
        const Value v = eval(*e.kids[0]);
        if (e.name == "not") return Value(!v.truthy());
        if (!v.is_number() && v.type() != Value::Type::Bool) throw EvalError{"bad operand type for unary " + e.name + ": '" + v.type_name() + "'"};
        if (e.name == "+") return v;
        if (v.type() != Value::Type::Float && v.as_int() == INT64_MIN) throw EvalError{"integer overflow in unary '-'"};
        return v.type() == Value::Type::Float ? Value(-v.as_number()) : Value(-v.as_int());
      }
      case Expr::Kind::Binary: {
        const Value a = eval(*e.kids[0]);
        if (e.name == "and") return a.truthy() ? eval(*e.kids[1]) : a;  // Python returns an operand
        if (e.name == "or") return a.truthy() ? a : eval(*e.kids[1]);
        return binary_op(e.name, a, eval(*e.kids[1]));
      }
      case Expr::Kind::Cond:
        if (eval(*e.kids[1]).truthy()) return eval(*e.kids[0]);
        return e.kids[2] ? eval(*e.kids[2]) : Value();
    }
    return Value();
  }

  Value eval_call(const Expr& e) {
    const Expr& callee = *e.kids[0];
    Value fn;
    if (callee.kind == Expr::Kind::Attr) {  // obj.method(…)
      const Value obj = eval(*callee.kids[0]);
      CallArgs a = eval_args(e, 1);
      Value result;
      if (call_method(obj, callee.name, a, &result)) return result;
      fn = get_attr(obj, callee.name);
      if (!fn.is_function()) throw EvalError{fmt::format("'{}' object has no method '{}'", obj.type_name(), callee.name)};
      return fn.as_function()(a);
    }
    fn = eval(callee);
    if (!fn.is_function())
      throw EvalError{callee.kind == Expr::Kind::Name && fn.is_undefined() ? "'" + callee.name + "' is undefined"
                                                                          : "'" + fn.type_name() + "' object is not callable"};
    CallArgs a = eval_args(e, 1);
    return fn.as_function()(a);
  }

  const std::string& name_;
  const std::string& source_;
  std::vector<Scope> scopes_;
  std::string out_;
  int macro_depth_ = 0;
  int64_t iterations_ = 0;
  static constexpr int64_t kMaxIterations = int64_t(1) << 20;
};

}  // namespace

Template::Template(const std::string& source, std::string name, const LexOptions& options)
    : name_(std::move(name)), lexed_(lex(source, name_, options)), body_(parse(lexed_, name_)) {}
Template::Template(Template&&) noexcept = default;
Template::~Template() = default;

std::string Template::render(const Dict& vars) const { return Evaluator(name_, lexed_.source, vars).render(body_); }

}  // namespace orion::jinja
