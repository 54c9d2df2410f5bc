// Item and attribute access, slicing, iteration and the binary operators, with Python's meaning.
#include <cmath>

#include <fmt/format.h>

#include "model/chat/jinja_builtins.h"
#include "model/tokenizer/unicode.h"

namespace orion::jinja {

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const int n = decode_utf8(s, i).len;
    out.push_back(s.substr(i, size_t(n)));
    i += size_t(n);
  }
  return out;
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw EvalError{"'" + name + "' of an undefined value"};
  if (const Value* v = obj.find(name)) return *v;
  return Value();
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw EvalError{"subscript of an undefined value"};
  if (obj.is_dict()) {
    if (!key.is_string()) return Value();
    const Value* v = obj.find(key.as_string());
    return v ? *v : Value();
  }
  if ((obj.is_list() || obj.is_string()) && key.type() == Value::Type::Int) {
    std::vector<std::string> chars;
    if (obj.is_string()) chars = utf8_chars(obj.as_string());
    const int64_t n = obj.is_list() ? int64_t(obj.as_list().size()) : int64_t(chars.size());
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();  // Jinja: an undefined value, not an IndexError
    return obj.is_list() ? obj.as_list()[size_t(i)] : Value(chars[size_t(i)]);
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value();
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (!obj.is_list() && !obj.is_string()) throw EvalError{"cannot slice a " + obj.type_name()};
  // (A step beyond ±2^40 selects one item, as any step longer than the sequence does.)
  const int64_t st = step.is_undefined() || step.is_none() ? 1 : std::clamp<int64_t>(step.as_int(), -(int64_t(1) << 40), int64_t(1) << 40);
  if (st == 0) throw EvalError{"slice step cannot be zero"};
  std::vector<std::string> chars;
  if (obj.is_string()) chars = utf8_chars(obj.as_string());
  const int64_t n = obj.is_list() ? int64_t(obj.as_list().size()) : int64_t(chars.size());
  // Python's slice.indices(n).
  auto bound = [&](const Value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    return st > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = bound(start, st > 0 ? 0 : n - 1), e = bound(stop, st > 0 ? n : -1);
  List items;
  std::string text;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (obj.is_list()) items.push_back(obj.as_list()[size_t(i)]);
    else text += chars[size_t(i)];
  }
  return obj.is_list() ? Value(std::move(items)) : Value(std::move(text));
}

List iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return {};
    case Value::Type::List: return v.as_list();
    case Value::Type::Dict: {
      List keys;
      for (const auto& [k, e] : v.as_dict()) keys.emplace_back(k);
      return keys;
    }
    case Value::Type::String: {
      List chars;
      for (auto& c : utf8_chars(v.as_string())) chars.emplace_back(c);
      return chars;
    }
    default: throw EvalError{"'" + v.type_name() + "' object is not iterable"};
  }
}

namespace {

constexpr uint64_t kMaxBytes = uint64_t(1) << 26, kMaxItems = uint64_t(1) << 20;  // the largest string, list `*` builds

bool numeric(const Value& v) { return v.is_number() || v.type() == Value::Type::Bool; }

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw EvalError{fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name())};
}

// Python's <: numbers, strings (by code point: UTF-8 byte order is the same), lists item by item.
bool less(const Value& a, const Value& b) {
  if (numeric(a) && numeric(b)) return a.as_number() < b.as_number();
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); i++)
      if (!(x[i] == y[i])) return less(x[i], y[i]);
    return x.size() < y.size();
  }
  throw EvalError{fmt::format("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name())};
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) throw EvalError{"'in <string>' requires string as left operand, not " + item.type_name()};
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return item.is_string() && container.find(item.as_string());
  for (const Value& v : iterate(container))
    if (v == item) return true;
  return false;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) throw EvalError{"'" + op + "' with an undefined value"};
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      List l = a.as_list();
      l.insert(l.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(l));
    }
  }
  if (op == "*" && (a.is_string() || a.is_list() || b.is_string() || b.is_list())) {
    const Value& seq = a.is_string() || a.is_list() ? a : b;
    const Value& n = &seq == &a ? b : a;
    if (n.type() != Value::Type::Int && n.type() != Value::Type::Bool) unsupported(op, a, b);
    const size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size();
    const uint64_t most = seq.is_string() ? kMaxBytes : kMaxItems;
    if (n.as_int() > 0 && unit > 0 && uint64_t(n.as_int()) > most / unit) throw EvalError{"repetition too large"};
    if (seq.is_string()) {
      std::string s;
      for (int64_t i = 0; i < n.as_int(); i++) s += seq.as_string();
      return Value(s);
    }
    List l;
    for (int64_t i = 0; i < n.as_int(); i++) l.insert(l.end(), seq.as_list().begin(), seq.as_list().end());
    return Value(std::move(l));
  }
  if (!numeric(a) || !numeric(b)) unsupported(op, a, b);
  const bool ints = a.type() != Value::Type::Float && b.type() != Value::Type::Float;
  const double x = a.as_number(), y = b.as_number();
  if ((op == "/" || op == "//" || op == "%") && y == 0) throw EvalError{"division by zero"};
  if (op == "/") return Value(x / y);
  if (ints) {
    // Python's integers do not overflow; templates never need more than 64 bits, so overflow is an error.
    const int64_t i = a.as_int(), j = b.as_int();
    int64_t r = 0;
    auto checked = [&](bool overflow) {
      if (overflow) throw EvalError{"integer overflow in '" + op + "'"};
      return Value(r);
    };
    if (op == "+") return checked(__builtin_add_overflow(i, j, &r));
    if (op == "-") return checked(__builtin_sub_overflow(i, j, &r));
    if (op == "*") return checked(__builtin_mul_overflow(i, j, &r));
    if (op == "//" || op == "%") {
      if (j == -1) return op == "//" ? checked(__builtin_sub_overflow(int64_t(0), i, &r)) : Value(int64_t(0));
      const int64_t q = i / j - ((i % j != 0) && ((i < 0) != (j < 0)));  // floor division
      return op == "//" ? Value(q) : Value(i - q * j);  // Python's modulo takes the divisor's sign
    }
    if (op == "**" && j >= 0) {
      r = 1;
      for (int64_t k = 0; k < j && r != 0 && !(r == 1 && (i == 1 || i == 0)); k++)
        if (__builtin_mul_overflow(r, i, &r)) throw EvalError{"integer overflow in '**'"};
      return Value(i == 0 && j > 0 ? int64_t(0) : r);
    }
  }
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "//") return Value(std::floor(x / y));
  if (op == "%") return Value(x - y * std::floor(x / y));
  if (op == "**") return Value(std::pow(x, y));
  unsupported(op, a, b);
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Value(a == b);
  if (op == "!=") return Value(!(a == b));
  if (op == "<") return Value(less(a, b));
  if (op == ">") return Value(less(b, a));
  if (op == "<=") return Value(!less(b, a));
  if (op == ">=") return Value(!less(a, b));
  if (op == "in") return Value(contains(b, a));
  if (op == "not in") return Value(!contains(b, a));
  if (op == "~") return Value(a.str() + b.str());
  return arithmetic(op, a, b);
}

}  // namespace orion::jinja
