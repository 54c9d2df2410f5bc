#include "model/chat/jinja_value.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace orion::jinja {

Value Value::none() {
  Value v;
  v.type_ = Type::None;
  return v;
}
Value::Value(bool b) : type_(Type::Bool), b_(b), i_(b ? 1 : 0) {}
Value::Value(int64_t i) : type_(Type::Int), i_(i) {}
Value::Value(double d) : type_(Type::Float), d_(d) {}
Value::Value(std::string s) : type_(Type::String), s_(std::make_shared<const std::string>(std::move(s))) {}
Value::Value(List l) : type_(Type::List), l_(std::make_shared<List>(std::move(l))) {}
Value Value::tuple(List l) {
  Value v(std::move(l));
  v.tuple_ = true;
  return v;
}
Value::Value(Dict d) : type_(Type::Dict), m_(std::make_shared<Dict>(std::move(d))) {}
Value::Value(Function f) : type_(Type::Function), f_(std::make_shared<const Function>(std::move(f))) {}

namespace {
template <typename Json>
Value value_of_json(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value(j.template get<bool>());
    case Json::value_t::number_integer: return Value(j.template get<int64_t>());
    case Json::value_t::number_unsigned: return Value(int64_t(j.template get<uint64_t>()));
    case Json::value_t::number_float: return Value(j.template get<double>());
    case Json::value_t::string: return Value(j.template get<std::string>());
    case Json::value_t::array: {
      List l;
      for (const auto& e : j) l.push_back(value_of_json(e));
      return Value(std::move(l));
    }
    case Json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.emplace_back(it.key(), value_of_json(it.value()));
      return Value(std::move(d));
    }
    default: return Value();
  }
}
}  // namespace

Value Value::from_json(const nlohmann::json& j) { return value_of_json(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_of_json(j); }

bool Value::truthy() const {
  switch (type_) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool: return b_;
    case Type::Int: return i_ != 0;
    case Type::Float: return d_ != 0;
    case Type::String: return !s_->empty();
    case Type::List: return !l_->empty();
    case Type::Dict: return !m_->empty();
    case Type::Function: return true;
  }
  return false;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest round-trip digits in scientific form, re-laid out as Python's repr does: fixed
  // notation for exponents −4 … 15, else d.ddde±XX.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(size_t(-exp - 1), '0') + digits;
    } else {
      if (digits.size() < size_t(exp + 1)) digits.append(size_t(exp + 1) - digits.size(), '0');
      out = digits.substr(0, size_t(exp + 1)) + "." + (digits.size() > size_t(exp + 1) ? digits.substr(size_t(exp + 1)) : "0");
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "") +
          fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  }
  return neg ? "-" + out : out;
}

namespace {
std::string quote_repr(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\' || c == q) out += {'\\', char(c)};
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += char(c);
  }
  return out + q;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += char(c);
    }
  }
  return out + "\"";
}

void append_json(const Value& v, int indent, int depth, std::string& out) {
  const bool pretty = indent >= 0;
  auto newline = [&](int d) {
    if (pretty) out += "\n" + std::string(size_t(indent * d), ' ');
  };
  const char* item_sep = pretty ? "," : ", ";
  switch (v.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: out += "null"; return;
    case Value::Type::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Type::Int: out += std::to_string(v.as_int()); return;
    case Value::Type::Float: {
      const double d = v.as_number();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
      return;
    }
    case Value::Type::String: out += json_string(v.as_string()); return;
    case Value::Type::List: {
      if (v.as_list().empty()) { out += "[]"; return; }
      out += "[";
      for (size_t i = 0; i < v.as_list().size(); i++) {
        if (i) out += item_sep;
        newline(depth + 1);
        append_json(v.as_list()[i], indent, depth + 1, out);
      }
      newline(depth);
      out += "]";
      return;
    }
    case Value::Type::Dict: {
      if (v.as_dict().empty()) { out += "{}"; return; }
      out += "{";
      bool first = true;
      for (const auto& [k, e] : v.as_dict()) {
        if (!first) out += item_sep;
        first = false;
        newline(depth + 1);
        out += json_string(k) + ": ";
        append_json(e, indent, depth + 1, out);
      }
      newline(depth);
      out += "}";
      return;
    }
    case Value::Type::Function: out += "null"; return;
  }
}
}  // namespace

std::string Value::str() const {
  switch (type_) {
    case Type::Undefined: return "";
    case Type::String: return *s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (type_) {
    case Type::Undefined: return "";
    case Type::None: return "None";
    case Type::Bool: return b_ ? "True" : "False";
    case Type::Int: return std::to_string(i_);
    case Type::Float: return float_repr(d_);
    case Type::String: return quote_repr(*s_);
    case Type::List: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < l_->size(); i++) out += (i ? ", " : "") + (*l_)[i].repr();
      return out + (!tuple_ ? "]" : l_->size() == 1 ? ",)" : ")");
    }
    case Type::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : *m_) {
        out += (first ? "" : ", ") + quote_repr(k) + ": " + v.repr();
        first = false;
      }
      return out + "}";
    }
    case Type::Function: return "<function>";
  }
  return "";
}

std::string Value::to_json(int indent) const {
  std::string out;
  append_json(*this, indent, 0, out);
  return out;
}

const Value* Value::find(const std::string& key) const {
  if (type_ != Type::Dict) return nullptr;
  for (const auto& [k, v] : *m_)
    if (k == key) return &v;
  return nullptr;
}

bool operator==(const Value& a, const Value& b) {
  const bool an = a.is_number() || a.type() == Value::Type::Bool, bn = b.is_number() || b.type() == Value::Type::Bool;
  if (an && bn) return a.as_number() == b.as_number();
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return true;
    case Value::Type::String: return a.as_string() == b.as_string();
    case Value::Type::List: return a.is_tuple() == b.is_tuple() && a.as_list() == b.as_list();
    case Value::Type::Dict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [k, v] : a.as_dict()) {
        const Value* o = b.find(k);
        if (!o || !(*o == v)) return false;
      }
      return true;
    }
    default: return a.f_ == b.f_;
  }
}

std::string Value::type_name() const {
  switch (type_) {
    case Type::Undefined: return "undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::List: return "list";
    case Type::Dict: return "dict";
    case Type::Function: return "function";
  }
  return "?";
}

Value CallArgs::get(size_t i, const std::string& name) const {
  for (const auto& [k, v] : kwargs)
    if (k == name) return v;
  return i < args.size() ? args[i] : Value();
}

}  // namespace orion::jinja
