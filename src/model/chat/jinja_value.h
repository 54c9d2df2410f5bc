// The values a Jinja template computes with, shaped after the Python objects Jinja works on:
// undefined, none, bool, int, float, string, list, dict (keys kept in insertion order, as Python's
// dict), and callables (raise_exception, namespace(), strftime_now). Lists and dicts are shared by
// reference, as in Python: `set ns.x = 1` changes the namespace every name of it sees.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace orion::jinja {

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, unique keys
// Positional arguments, then keyword arguments, of a call.
struct CallArgs;
using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Type { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

  Value() = default;  // undefined
  static Value none();
  Value(bool b);
  Value(int i) : Value(int64_t(i)) {}
  Value(int64_t i);
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  Value(List l);
  static Value tuple(List l);  // a list that prints as (a, b), as Python's tuples (dict.items() pairs)
  Value(Dict d);
  Value(Function f);
  // JSON as values; ordered_json keeps the objects' key order (what tojson writes back).
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::Undefined; }
  bool is_none() const { return type_ == Type::None; }
  bool is_string() const { return type_ == Type::String; }
  bool is_number() const { return type_ == Type::Int || type_ == Type::Float; }
  bool is_list() const { return type_ == Type::List; }
  bool is_tuple() const { return type_ == Type::List && tuple_; }
  bool is_dict() const { return type_ == Type::Dict; }
  bool is_function() const { return type_ == Type::Function; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_number() const { return type_ == Type::Float ? d_ : double(i_); }
  const std::string& as_string() const { return *s_; }
  List& as_list() const { return *l_; }
  Dict& as_dict() const { return *m_; }
  const Function& as_function() const { return *f_; }

  // Python's bool(x): empty strings, lists and dicts, 0, none and undefined are false.
  bool truthy() const;
  // Python's str(x) (what {{ x }} prints): None → "None", True → "True", 1.0 → "1.0", lists and
  // dicts in repr form ['a', 1]. Undefined prints as "".
  std::string str() const;
  // Python's repr(x): strings quoted.
  std::string repr() const;
  // json.dumps(x, ensure_ascii=False, indent=indent) as transformers' tojson calls it: ", " and
  // ": " without indent, "," and ": " with one; keys in insertion order.
  std::string to_json(int indent = -1) const;
  // A dict's value for key, or nullptr.
  const Value* find(const std::string& key) const;
  // Python ==, and < for numbers, strings and lists.
  friend bool operator==(const Value& a, const Value& b);
  std::string type_name() const;  // "str", "int", "list", … for error messages

 private:
  Type type_ = Type::Undefined;
  bool b_ = false;
  bool tuple_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<List> l_;
  std::shared_ptr<Dict> m_;
  std::shared_ptr<const Function> f_;
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // The keyword argument name, else positional argument i, else undefined.
  Value get(size_t i, const std::string& name) const;
};

// Python's float repr: the shortest digits that round-trip, always with a "." or an exponent.
std::string float_repr(double d);

}  // namespace orion::jinja
