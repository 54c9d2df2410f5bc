// Jinja parser: recursive descent over the lexer's tokens, with Jinja's operator precedence
// (lowest first): x if c else y → or → and → not → comparisons and in → + - → ~ → * / // % → ** →
// unary - + → primary with .attr, [index], [a:b:c], (call), | filter and `is` test.
#include <set>

#include "base/error.h"
#include "model/chat/jinja_ast.h"

namespace orion::jinja {
namespace {

NodePtr new_node(Node::Kind kind, size_t offset) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->offset = offset;
  return n;
}

class Parser {
 public:
  Parser(const Lexed& lx, const std::string& name) : lx_(lx), name_(name) {}

  Body parse_template() {
    Body body = parse_body({});
    if (cur().kind != Tok::End) fail(cur().offset, "unexpected tag '" + cur().value + "'");
    return body;
  }

 private:
  const Token& cur() const { return lx_.tokens[pos_]; }
  const Token& peek(size_t k = 1) const { return lx_.tokens[std::min(pos_ + k, lx_.tokens.size() - 1)]; }
  [[noreturn]] void fail(size_t at, const std::string& msg) const { throw_template_error(name_, lx_.source, at, msg); }
  bool is_op(const char* op) const { return cur().kind == Tok::Op && cur().value == op; }
  bool is_name(const char* n) const { return cur().kind == Tok::Name && cur().value == n; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    pos_++;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    pos_++;
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(cur().offset, fmt::format("expected '{}'", op));
  }
  std::string expect_name() {
    if (cur().kind != Tok::Name) fail(cur().offset, "expected a name");
    return lx_.tokens[pos_++].value;
  }
  void expect_block_end() {
    if (cur().kind != Tok::BlockEnd) fail(cur().offset, "expected the end of the block tag %}");
    pos_++;
  }

  // Statements up to one of the block keywords in `stops` (left unconsumed, after its {%).
  Body parse_body(const std::set<std::string>& stops) {
    Body body;
    while (cur().kind != Tok::End) {
      const Token& t = cur();
      if (t.kind == Tok::Text) {
        auto n = new_node(Node::Kind::Text, t.offset);
        n->text = t.value;
        body.push_back(std::move(n));
        pos_++;
      } else if (t.kind == Tok::VarBegin) {
        pos_++;
        auto n = new_node(Node::Kind::Output, t.offset);
        n->expr = parse_expression();
        if (cur().kind != Tok::VarEnd) fail(cur().offset, "expected the end of the print tag }}");
        pos_++;
        body.push_back(std::move(n));
      } else if (t.kind == Tok::BlockBegin) {
        if (peek().kind == Tok::Name && stops.count(peek().value)) return body;
        pos_++;
        body.push_back(parse_statement());
      } else {
        fail(t.offset, "unexpected token");
      }
    }
    if (!stops.empty()) fail(lx_.source.size(), "unexpected end of template: missing {% " + *stops.rbegin() + " %}");
    return body;
  }

  // After {% KEYWORD: consumes up to the matching end tag.
  NodePtr parse_statement() {
    DepthGuard guard(*this);
    const Token& kw = cur();
    if (kw.kind != Tok::Name) fail(kw.offset, "expected a statement name");
    const std::string k = kw.value;
    pos_++;
    if (k == "if") return parse_if(kw.offset);
    if (k == "for") return parse_for(kw.offset);
    if (k == "set") return parse_set(kw.offset);
    if (k == "macro") return parse_macro(kw.offset);
    if (k == "generation") {  // transformers' {% generation %}…{% endgeneration %}: marks assistant text, renders as is
      expect_block_end();
      auto n = new_node(Node::Kind::If, kw.offset);
      auto yes = make(Expr::Kind::Literal, kw.offset);
      yes->value = Value(true);
      n->branches.emplace_back(std::move(yes), parse_body({"endgeneration"}));
      end_tag("endgeneration");
      return n;
    }
    if (k == "break" || k == "continue") {
      expect_block_end();
      return new_node(k == "break" ? Node::Kind::Break : Node::Kind::Continue, kw.offset);
    }
    fail(kw.offset, "unknown tag '" + k + "'");
  }

  // Consumes {% name %} where the body parser stopped.
  void end_tag(const char* name) {
    pos_++;  // {%
    if (!accept_name(name)) fail(cur().offset, fmt::format("expected {{% {} %}}", name));
    expect_block_end();
  }

  NodePtr parse_if(size_t at) {
    auto n = new_node(Node::Kind::If, at);
    ExprPtr cond = parse_expression();
    expect_block_end();
    while (true) {
      Body b = parse_body({"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(b));
      pos_++;  // {%
      const std::string k = expect_name();
      if (k == "elif") {
        cond = parse_expression();
        expect_block_end();
        continue;
      }
      expect_block_end();
      if (k == "else") {
        n->else_body = parse_body({"endif"});
        end_tag("endif");
      }
      return n;
    }
  }

  NodePtr parse_for(size_t at) {
    auto n = new_node(Node::Kind::For, at);
    do n->targets.push_back(expect_name());
    while (accept_op(","));
    if (!accept_name("in")) fail(cur().offset, "expected 'in' in the for loop");
    n->expr = parse_or();  // not a conditional expression: `if` here filters the items
    if (accept_name("if")) n->cond = parse_or();
    expect_block_end();
    n->body = parse_body({"else", "endfor"});
    if (is_name_after_begin("else")) {
      end_tag("else");
      n->else_body = parse_body({"endfor"});
    }
    end_tag("endfor");
    return n;
  }
  bool is_name_after_begin(const char* n) const { return peek().kind == Tok::Name && peek().value == n; }

  NodePtr parse_set(size_t at) {
    auto n = new_node(Node::Kind::Set, at);
    n->targets.push_back(expect_name());
    if (accept_op(".")) n->targets.push_back(expect_name());
    if (accept_op("=")) {
      n->expr = parse_expression();
      expect_block_end();
      return n;
    }
    expect_block_end();  // block form: {% set x %}…{% endset %}
    n->body = parse_body({"endset"});
    end_tag("endset");
    return n;
  }

  NodePtr parse_macro(size_t at) {
    auto n = new_node(Node::Kind::Macro, at);
    n->targets.push_back(expect_name());
    expect_op("(");
    while (!accept_op(")")) {
      std::string p = expect_name();
      ExprPtr def = accept_op("=") ? parse_expression() : nullptr;
      n->params.emplace_back(std::move(p), std::move(def));
      if (!is_op(")")) expect_op(",");
    }
    expect_block_end();
    n->body = parse_body({"endmacro"});
    end_tag("endmacro");
    return n;
  }

  // ---- expressions ----
  ExprPtr make(Expr::Kind k, size_t at, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->offset = at;
    e->name = std::move(name);
    return e;
  }
  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b, size_t at) {
    auto e = make(Expr::Kind::Binary, at, op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  // Nesting is bounded so that a hostile template ("((((…") cannot overflow the stack.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail(p.cur().offset, "expression or block nested too deeply");
    }
    ~DepthGuard() { p.depth_--; }
  };
  static constexpr int kMaxDepth = 200;

  ExprPtr parse_expression() {
    DepthGuard guard(*this);
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const size_t at = cur().offset;
      pos_++;
      auto c = make(Expr::Kind::Cond, at);
      c->kids.push_back(std::move(e));
      c->kids.push_back(parse_or());
      c->kids.push_back(accept_name("else") ? parse_expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }
  // One precedence level of left-associative binary operators: next (op next)*.
  ExprPtr binary_level(std::initializer_list<const char*> ops, ExprPtr (Parser::*next)()) {
    ExprPtr e = (this->*next)();
    while (true) {
      const Token& t = cur();
      bool match = false;
      for (const char* op : ops) match = match || ((t.kind == Tok::Op || t.kind == Tok::Name) && t.value == op);
      if (!match) return e;
      pos_++;
      e = binary(t.value, std::move(e), (this->*next)(), t.offset);
    }
  }
  ExprPtr parse_or() { return binary_level({"or"}, &Parser::parse_and); }
  ExprPtr parse_and() { return binary_level({"and"}, &Parser::parse_not); }
  ExprPtr parse_not() {
    DepthGuard guard(*this);
    if (is_name("not")) {
      auto e = make(Expr::Kind::Unary, cur().offset, "not");
      pos_++;
      e->kids.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    static const std::set<std::string> ops = {"==", "!=", "<", "<=", ">", ">="};
    while (true) {
      const size_t at = cur().offset;
      std::string op;
      if (cur().kind == Tok::Op && ops.count(cur().value)) {
        op = cur().value;
        pos_++;
      } else if (is_name("in")) {
        op = "in";
        pos_++;
      } else if (is_name("not") && peek().kind == Tok::Name && peek().value == "in") {
        op = "not in";
        pos_ += 2;
      } else {
        return e;
      }
      e = binary(op, std::move(e), parse_math1(), at);
    }
  }
  ExprPtr parse_math1() { return binary_level({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_concat() { return binary_level({"~"}, &Parser::parse_math2); }
  ExprPtr parse_math2() { return binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return binary_level({"**"}, &Parser::parse_unary); }
  ExprPtr parse_unary() {
    DepthGuard guard(*this);
    if (is_op("-") || is_op("+")) {
      auto e = make(Expr::Kind::Unary, cur().offset, cur().value);
      pos_++;
      e->kids.push_back(parse_unary());
      return e;
    }
    return parse_postfix(parse_primary());
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.kind) {
      case Tok::String: {
        pos_++;
        auto e = make(Expr::Kind::Literal, t.offset);
        std::string s = t.value;
        while (cur().kind == Tok::String) s += lx_.tokens[pos_++].value;  // adjacent literals join
        e->value = Value(s);
        return e;
      }
      case Tok::Int:
      case Tok::Float: {
        pos_++;
        auto e = make(Expr::Kind::Literal, t.offset);
        try {
          e->value = t.kind == Tok::Int ? Value(int64_t(std::stoll(t.value))) : Value(std::stod(t.value));
        } catch (const std::exception&) {  // out of range of int64 / double
          fail(t.offset, "number literal out of range: " + t.value);
        }
        return e;
      }
      case Tok::Name: {
        pos_++;
        auto e = make(Expr::Kind::Literal, t.offset);
        if (t.value == "true" || t.value == "True") e->value = Value(true);
        else if (t.value == "false" || t.value == "False") e->value = Value(false);
        else if (t.value == "none" || t.value == "None") e->value = Value::none();
        else e = make(Expr::Kind::Name, t.offset, t.value);
        return e;
      }
      case Tok::Op:
        if (t.value == "(") return parse_paren();
        if (t.value == "[") return parse_list();
        if (t.value == "{") return parse_dict();
        [[fallthrough]];
      default: fail(t.offset, t.kind == Tok::VarEnd || t.kind == Tok::BlockEnd ? "expected an expression" : "unexpected '" + t.value + "'");
    }
  }
  ExprPtr parse_paren() {  // (expr) or a tuple (a, b)
    const size_t at = cur().offset;
    pos_++;
    if (accept_op(")")) return make(Expr::Kind::List, at, "tuple");
    ExprPtr first = parse_expression();
    if (accept_op(")")) return first;
    auto e = make(Expr::Kind::List, at, "tuple");
    e->kids.push_back(std::move(first));
    while (accept_op(",") && !is_op(")")) e->kids.push_back(parse_expression());
    expect_op(")");
    return e;
  }
  ExprPtr parse_list() {
    auto e = make(Expr::Kind::List, cur().offset);
    pos_++;
    while (!accept_op("]")) {
      e->kids.push_back(parse_expression());
      if (!is_op("]")) expect_op(",");
    }
    return e;
  }
  ExprPtr parse_dict() {
    auto e = make(Expr::Kind::Dict, cur().offset);
    pos_++;
    while (!accept_op("}")) {
      e->kids.push_back(parse_expression());
      expect_op(":");
      e->kids.push_back(parse_expression());
      if (!is_op("}")) expect_op(",");
    }
    return e;
  }

  // Positional and keyword arguments up to ")" (the "(" already consumed) into e->kids[1..].
  void parse_args(Expr& e) {
    while (!accept_op(")")) {
      if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().value == "=") {
        e.kw_names.push_back(expect_name());
        pos_++;
      } else if (!e.kw_names.empty()) {
        fail(cur().offset, "positional argument after a keyword argument");
      }
      e.kids.push_back(parse_expression());
      if (!is_op(")")) expect_op(",");
    }
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      const size_t at = cur().offset;
      if (accept_op(".")) {
        auto a = make(Expr::Kind::Attr, at, cur().kind == Tok::Int ? lx_.tokens[pos_++].value : expect_name());
        a->kids.push_back(std::move(e));
        e = std::move(a);
      } else if (accept_op("[")) {
        e = parse_subscript(std::move(e), at);
      } else if (accept_op("(")) {
        auto c = make(Expr::Kind::Call, at);
        c->kids.push_back(std::move(e));
        parse_args(*c);
        e = std::move(c);
      } else if (accept_op("|")) {
        const size_t name_at = cur().offset;
        auto f = make(Expr::Kind::Filter, name_at, expect_name());
        if (!is_known_filter(f->name)) fail(f->offset, "no filter named '" + f->name + "'");
        f->kids.push_back(std::move(e));
        if (accept_op("(")) parse_args(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        pos_++;
        auto t = make(Expr::Kind::Test, at);
        t->negate = accept_name("not");
        t->name = expect_name();
        if (!is_known_test(t->name)) fail(t->offset, "no test named '" + t->name + "'");
        t->kids.push_back(std::move(e));
        if (accept_op("(")) parse_args(*t);
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  ExprPtr parse_subscript(ExprPtr obj, size_t at) {
    ExprPtr bounds[3];
    int part = 0;
    bool slice = false;
    while (!accept_op("]")) {
      if (accept_op(":")) {
        slice = true;
        if (++part > 2) fail(cur().offset, "too many ':' in a slice");
        continue;
      }
      if (bounds[part]) fail(cur().offset, "expected ']'");
      bounds[part] = parse_expression();
    }
    if (!slice && !bounds[0]) fail(at, "empty subscript");
    auto e = make(slice ? Expr::Kind::Slice : Expr::Kind::Index, at);
    e->kids.push_back(std::move(obj));
    for (int i = 0; i < (slice ? 3 : 1); i++) e->kids.push_back(std::move(bounds[i]));
    return e;
  }

  const Lexed& lx_;
  const std::string& name_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse(const Lexed& lexed, const std::string& name) { return Parser(lexed, name).parse_template(); }

}  // namespace orion::jinja
