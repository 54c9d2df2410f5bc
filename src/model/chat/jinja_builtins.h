// What Jinja templates call on values: filters (x | trim), tests (x is defined), methods of the
// Python objects they see (s.strip(), d.items()), item and attribute access and the operators.
// Each behaves as Jinja 3 does under transformers' ImmutableSandboxedEnvironment; a misuse (a
// method of the wrong type, `'a' + 1`) throws EvalError, which the evaluator turns into an
// orion::Error naming the template's line and column.
#pragma once
#include <string>
#include <vector>

#include "model/chat/jinja_value.h"

namespace orion::jinja {

struct EvalError {
  std::string message;
};

Value apply_filter(const std::string& name, const Value& v, CallArgs& args);
bool apply_test(const std::string& name, const Value& v, CallArgs& args);
// obj.name(args) when obj has such a method; false when it has none.
bool call_method(const Value& obj, const std::string& name, CallArgs& args, Value* result);

Value get_attr(const Value& obj, const std::string& name);  // obj.name (a dict's key), else undefined
Value get_item(const Value& obj, const Value& key);          // obj[key], negative list indices count back
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

Value binary_op(const std::string& op, const Value& a, const Value& b);  // + - * / // % ** ~ == != < <= > >= in
// Items of a for loop: a list's items, a dict's keys, a string's characters; undefined: none.
List iterate(const Value& v);
// A UTF-8 string split into its characters (Python indexes, slices and measures by character).
std::vector<std::string> utf8_chars(const std::string& s);

}  // namespace orion::jinja
