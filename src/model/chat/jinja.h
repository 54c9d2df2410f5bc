// A Jinja template engine for chat templates: the subset of Jinja 3 that the chat templates of
// Hugging Face models use, rendering byte for byte what transformers' apply_chat_template renders
// (jinja2 with trim_blocks and lstrip_blocks, tojson as json.dumps(ensure_ascii=False)).
//
//   text, {{ expr }}, {% stmt %}, {# comment #}, whitespace control (- and +, trim_blocks,
//   lstrip_blocks); if/elif/else, for (loop.index, index0, revindex, revindex0, first, last,
//   length, previtem, nextitem; `for x in xs if c`; else; tuple targets; break/continue), set (also
//   ns.attr and the block form), macro, transformers' generation block; expressions: literals, lists, dicts, tuples, .attr,
//   [index], [a:b:c], calls with keyword arguments, | filters, is [not] tests, `x if c else y`,
//   and/or/not, in/not in, comparisons, + - * / // % ** ~; globals: namespace(), range(),
//   raise_exception(msg) and whatever the caller passes (transformers' strftime_now).
//
// The layers: jinja_lexer (tokens, whitespace control), jinja_parser (syntax tree, jinja_ast.h),
// jinja_eval (rendering), jinja_builtins / jinja_ops (filters, tests, methods, operators),
// jinja_value (the Python-like values).
#pragma once
#include <memory>
#include <string>

#include "model/chat/jinja_ast.h"
#include "model/chat/jinja_value.h"

namespace orion::jinja {

class Template {
 public:
  // Parses `source`; `name` (a file name, or "tokenizer_config.json: chat_template") is what errors
  // name. Syntax errors, unknown filters and tests: orion::Error (Input) with line and column.
  Template(const std::string& source, std::string name, const LexOptions& options = {});
  Template(Template&&) noexcept;
  ~Template();

  // Renders with `vars` as the template's globals (beside namespace, range and raise_exception).
  // raise_exception(msg), undefined values misused and type errors: orion::Error (Input) naming
  // the template and the line and column of the expression.
  std::string render(const Dict& vars) const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Lexed lexed_;
  Body body_;
};

}  // namespace orion::jinja
