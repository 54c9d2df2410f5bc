// The syntax tree of a parsed Jinja template: expressions (Expr) and statements (Node). Built by
// parse() (jinja_parser.cpp), walked by the evaluator (jinja_eval.cpp). Every node keeps the byte
// offset it came from, so an error while rendering names its line and column.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/chat/jinja_lexer.h"
#include "model/chat/jinja_value.h"

namespace orion::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,  // value
    Name,     // name
    List,     // kids: the items; name "tuple" for (a, b)
    Dict,     // kids: key, value, key, value, …
    Attr,     // kids[0].name
    Index,    // kids[0][kids[1]]
    Slice,    // kids[0][kids[1]:kids[2]:kids[3]], each bound may be null
    Call,     // kids[0](kids[1..]); the last kw_names.size() arguments are keyword arguments
    Filter,   // kids[0] | name(kids[1..]), keyword arguments as for Call
    Test,     // kids[0] is [not] name(kids[1..]); negate for "is not"
    Unary,    // name ("not", "-", "+") kids[0]
    Binary,   // kids[0] name kids[1]: arithmetic, comparison, "and", "or", "in", "not in", "~"
    Cond      // kids[0] if kids[1] else kids[2] (kids[2] null: undefined)
  };
  Kind kind;
  size_t offset = 0;
  std::string name;
  Value value;
  std::vector<ExprPtr> kids;
  std::vector<std::string> kw_names;
  bool negate = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    Text,      // text
    Output,    // {{ expr }}
    If,        // branches: (cond, body) …; else_body
    For,       // for targets in expr [if cond]: body [else: else_body]
    Set,       // set target[.attr] = expr, or {% set target %}body{% endset %} when expr is null
    Break,     // loop controls (transformers enables jinja2.ext.loopcontrols)
    Continue,
    Macro,     // macro name(params with defaults): body
  };
  Kind kind;
  size_t offset = 0;
  std::string text;                  // Text
  ExprPtr expr;                      // Output, For (iterable), Set (value)
  ExprPtr cond;                      // For: the optional filter
  std::vector<std::pair<ExprPtr, Body>> branches;  // If
  Body body, else_body;              // For, Set (block form), If (else), Macro
  std::vector<std::string> targets;  // For: loop variables; Set: name [, attribute]; Macro: name
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro parameters with their defaults
};

// Parses the tokens of lex(); syntax errors, unknown filters and unknown tests are orion::Errors
// naming `name` and the line and column.
Body parse(const Lexed& lexed, const std::string& name);

// The filters and tests the evaluator knows (jinja_builtins.cpp): the parser refuses others, as
// Jinja does when it compiles a template.
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace orion::jinja
