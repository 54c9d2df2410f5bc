// Filters, tests and methods. Whitespace is Python's (str.isspace(): the Unicode class table of
// model/tokenizer/unicode.h); upper, lower, title and capitalize change ASCII letters only.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "model/chat/jinja_ast.h"
#include "model/chat/jinja_builtins.h"
#include "model/tokenizer/unicode.h"

namespace orion::jinja {
namespace {

bool is_space_at(const std::string& s, size_t i, int* len) {
  const Utf8Char c = decode_utf8(s, i);
  *len = c.len;
  return c.cp != kInvalidCodepoint && char_class(c.cp) == CharClass::Space;
}

// str.strip(chars): chars empty means whitespace.
std::string strip(const std::string& s, const std::string& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (chars.empty()) {
    int n = 0;
    if (left)
      while (b < e && is_space_at(s, b, &n)) b += size_t(n);
    if (right)
      while (e > b) {  // step back to the start of the last character
        size_t p = e - 1;
        while (p > b && (uint8_t(s[p]) & 0xc0) == 0x80) p--;
        if (!is_space_at(s, p, &n)) break;
        e = p;
      }
    return s.substr(b, e - b);
  }
  if (left)
    while (b < e && chars.find(s[b]) != std::string::npos) b++;
  if (right)
    while (e > b && chars.find(s[e - 1]) != std::string::npos) e--;
  return s.substr(b, e - b);
}
std::string strip_chars(const CallArgs& a) {
  const Value c = a.get(0, "chars");
  return c.is_string() ? c.as_string() : "";
}

std::string map_ascii(std::string s, int (*f)(int)) {
  for (char& c : s)
    if (uint8_t(c) < 0x80) c = char(f(uint8_t(c)));
  return s;
}
std::string capitalize(const std::string& s) {
  std::string out = map_ascii(s, [](int c) { return std::tolower(c); });
  if (!out.empty() && uint8_t(out[0]) < 0x80) out[0] = char(std::toupper(uint8_t(out[0])));
  return out;
}
std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    if (uint8_t(c) >= 0x80) { start = false; continue; }
    c = char(start ? std::toupper(uint8_t(c)) : std::tolower(uint8_t(c)));
    start = !std::isalpha(uint8_t(c));
  }
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;  // (Python inserts `to` between characters; no template does that)
  std::string out;
  size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; n++) {
    const size_t f = s.find(from, pos);
    if (f == std::string::npos) break;
    out += s.substr(pos, f - pos) + to;
    pos = f + from.size();
  }
  return out + s.substr(pos);
}

List split(const std::string& s, const Value& sep, int64_t maxsplit) {
  List out;
  if (!sep.is_string()) {  // runs of whitespace, empty pieces dropped
    int n = 0;
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_space_at(s, i, &n)) i += size_t(n);
      if (i >= s.size()) break;
      if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
        out.emplace_back(strip(s.substr(i), "", false, true));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_space_at(s, j, &n)) j += size_t(n);
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = sep.as_string();
  if (d.empty()) throw EvalError{"empty separator"};
  size_t pos = 0;
  while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
    const size_t f = s.find(d, pos);
    if (f == std::string::npos) break;
    out.emplace_back(s.substr(pos, f - pos));
    pos = f + d.size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

bool affix(const std::string& s, const Value& what, bool prefix) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) throw EvalError{"startswith/endswith takes a string or a tuple of strings"};
    const std::string& p = v.as_string();
    return prefix ? s.starts_with(p) : s.ends_with(p);
  };
  if (what.is_list()) return std::any_of(what.as_list().begin(), what.as_list().end(), one);
  return one(what);
}

int64_t length(const Value& v) {
  if (v.is_string()) return int64_t(utf8_chars(v.as_string()).size());
  if (v.is_list()) return int64_t(v.as_list().size());
  if (v.is_dict()) return int64_t(v.as_dict().size());
  if (v.is_undefined()) return 0;
  throw EvalError{"object of type '" + v.type_name() + "' has no len()"};
}

int indent_arg(const CallArgs& a) {
  const Value i = a.get(0, "indent");
  return i.type() == Value::Type::Int ? int(i.as_int()) : -1;
}

List items(const Value& v) {
  if (v.is_undefined()) return {};
  if (!v.is_dict()) throw EvalError{"items() of a " + v.type_name()};
  List out;
  for (const auto& [k, e] : v.as_dict()) out.push_back(Value::tuple(List{Value(k), e}));
  return out;
}

// selectattr / rejectattr: items whose attribute passes the test (default: is truthy).
Value select_attr(const Value& v, CallArgs& a, bool keep) {
  const std::string attr = a.get(0, "attribute").str();
  const std::string test = a.args.size() > 1 ? a.args[1].str() : "";
  CallArgs targs;
  targs.args.assign(a.args.size() > 2 ? a.args.begin() + 2 : a.args.end(), a.args.end());
  List out;
  for (const Value& item : iterate(v)) {
    const Value x = get_attr(item, attr);
    const bool pass = test.empty() ? x.truthy() : apply_test(test, x, targs);
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

using FilterFn = Value (*)(const Value&, CallArgs&);
const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> table = {
      {"trim", [](const Value& v, CallArgs& a) { return Value(strip(v.str(), strip_chars(a), true, true)); }},
      {"length", [](const Value& v, CallArgs&) { return Value(length(v)); }},
      {"count", [](const Value& v, CallArgs&) { return Value(length(v)); }},
      {"tojson", [](const Value& v, CallArgs& a) { return Value(v.to_json(indent_arg(a))); }},
      {"upper", [](const Value& v, CallArgs&) { return Value(map_ascii(v.str(), [](int c) { return std::toupper(c); })); }},
      {"lower", [](const Value& v, CallArgs&) { return Value(map_ascii(v.str(), [](int c) { return std::tolower(c); })); }},
      {"capitalize", [](const Value& v, CallArgs&) { return Value(capitalize(v.str())); }},
      {"title", [](const Value& v, CallArgs&) { return Value(title(v.str())); }},
      {"string", [](const Value& v, CallArgs&) { return Value(v.str()); }},
      {"safe", [](const Value& v, CallArgs&) { return v; }},
      {"default",
       [](const Value& v, CallArgs& a) {
         const bool boolean = a.get(1, "boolean").truthy();
         const Value d = a.get(0, "default_value");
         if (!v.is_undefined() && (!boolean || v.truthy())) return v;
         return d.is_undefined() ? Value("") : d;
       }},
      {"join",
       [](const Value& v, CallArgs& a) {
         const Value sep = a.get(0, "d"), attr = a.get(1, "attribute");
         std::string out;
         bool first = true;
         for (const Value& e : iterate(v)) {
           out += (first ? "" : sep.str()) + (attr.is_undefined() ? e : get_attr(e, attr.str())).str();
           first = false;
         }
         return Value(out);
       }},
      {"replace",
       [](const Value& v, CallArgs& a) {
         const Value n = a.get(2, "count");
         return Value(replace(v.str(), a.get(0, "old").str(), a.get(1, "new").str(), n.is_number() ? n.as_int() : -1));
       }},
      {"items", [](const Value& v, CallArgs&) { return Value(items(v)); }},
      {"list", [](const Value& v, CallArgs&) { return Value(iterate(v)); }},
      {"first", [](const Value& v, CallArgs&) { List l = iterate(v); return l.empty() ? Value() : l.front(); }},
      {"last", [](const Value& v, CallArgs&) { List l = iterate(v); return l.empty() ? Value() : l.back(); }},
      {"reverse",
       [](const Value& v, CallArgs&) {
         if (v.is_string()) {
           auto c = utf8_chars(v.as_string());
           std::string s;
           for (auto it = c.rbegin(); it != c.rend(); ++it) s += *it;
           return Value(s);
         }
         List l = iterate(v);
         std::reverse(l.begin(), l.end());
         return Value(std::move(l));
       }},
      {"int",
       [](const Value& v, CallArgs&) {
         if (v.type() == Value::Type::Float && !(std::fabs(v.as_number()) < 9.2e18)) throw EvalError{"float too large for int"};
         if (v.is_number() || v.type() == Value::Type::Bool) return v.type() == Value::Type::Float ? Value(int64_t(v.as_number())) : Value(v.as_int());
         try {
           return Value(int64_t(std::stoll(v.str())));
         } catch (...) {
           return Value(int64_t(0));
         }
       }},
      {"abs", [](const Value& v, CallArgs&) {
         if (v.type() == Value::Type::Int) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
         if (v.is_number()) return Value(v.as_number() < 0 ? -v.as_number() : v.as_number());
         throw EvalError{"bad operand type for abs(): '" + v.type_name() + "'"};
       }},
      {"map",
       [](const Value& v, CallArgs& a) {
         const Value attr = a.get(99, "attribute");
         List out;
         for (const Value& e : iterate(v)) {
           if (!attr.is_undefined()) out.push_back(get_attr(e, attr.str()));
           else if (!a.args.empty()) {
             CallArgs rest;
             rest.args.assign(a.args.begin() + 1, a.args.end());
             out.push_back(apply_filter(a.args[0].str(), e, rest));
           } else out.push_back(e);
         }
         return Value(std::move(out));
       }},
      {"selectattr", [](const Value& v, CallArgs& a) { return select_attr(v, a, true); }},
      {"rejectattr", [](const Value& v, CallArgs& a) { return select_attr(v, a, false); }},
  };
  return table;
}

using TestFn = bool (*)(const Value&, CallArgs&);
const std::map<std::string, TestFn>& tests() {
  using T = Value::Type;
  static const std::map<std::string, TestFn> table = {
      {"defined", [](const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, CallArgs&) { return v.is_none(); }},
      {"string", [](const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](const Value& v, CallArgs&) { return v.is_dict(); }},
      // Jinja's undefined is iterable (as an empty sequence).
      {"iterable", [](const Value& v, CallArgs&) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }},
      {"sequence", [](const Value& v, CallArgs&) { return v.is_string() || v.is_list() || v.is_dict(); }},
      {"number", [](const Value& v, CallArgs&) { return v.is_number() || v.type() == T::Bool; }},
      {"integer", [](const Value& v, CallArgs&) { return v.type() == T::Int; }},
      {"float", [](const Value& v, CallArgs&) { return v.type() == T::Float; }},
      {"boolean", [](const Value& v, CallArgs&) { return v.type() == T::Bool; }},
      {"true", [](const Value& v, CallArgs&) { return v.type() == T::Bool && v.as_bool(); }},
      {"false", [](const Value& v, CallArgs&) { return v.type() == T::Bool && !v.as_bool(); }},
      {"callable", [](const Value& v, CallArgs&) { return v.is_function(); }},
      {"odd", [](const Value& v, CallArgs&) { return v.type() == T::Int && v.as_int() % 2 != 0; }},
      {"even", [](const Value& v, CallArgs&) { return v.type() == T::Int && v.as_int() % 2 == 0; }},
      {"eq", [](const Value& v, CallArgs& a) { return v == a.get(0, "other"); }},
      {"equalto", [](const Value& v, CallArgs& a) { return v == a.get(0, "other"); }},
      {"ne", [](const Value& v, CallArgs& a) { return !(v == a.get(0, "other")); }},
      {"in", [](const Value& v, CallArgs& a) { return binary_op("in", v, a.get(0, "seq")).truthy(); }},
  };
  return table;
}

}  // namespace

bool is_known_filter(const std::string& name) { return filters().count(name) || name == "d"; }
bool is_known_test(const std::string& name) { return tests().count(name) > 0; }

Value apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  auto it = filters().find(name == "d" ? "default" : name);
  if (it == filters().end()) throw EvalError{"no filter named '" + name + "'"};
  return it->second(v, args);
}

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw EvalError{"no test named '" + name + "'"};
  return it->second(v, args);
}

bool call_method(const Value& obj, const std::string& name, CallArgs& a, Value* result) {
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    if (name == "strip") *result = Value(strip(s, strip_chars(a), true, true));
    else if (name == "lstrip") *result = Value(strip(s, strip_chars(a), true, false));
    else if (name == "rstrip") *result = Value(strip(s, strip_chars(a), false, true));
    else if (name == "startswith") *result = Value(affix(s, a.get(0, "prefix"), true));
    else if (name == "endswith") *result = Value(affix(s, a.get(0, "suffix"), false));
    else if (name == "split") {
      const Value m = a.get(1, "maxsplit");
      *result = Value(split(s, a.get(0, "sep"), m.is_number() ? m.as_int() : -1));
    } else if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") *result = apply_filter(name, obj, a);
    else if (name == "replace") *result = apply_filter(name, obj, a);
    else if (name == "find") *result = Value(int64_t(s.find(a.get(0, "sub").str()) == std::string::npos ? -1 : int64_t(utf8_chars(s.substr(0, s.find(a.get(0, "sub").str()))).size())));
    else return false;
    return true;
  }
  if (obj.is_dict()) {
    if (name == "items") *result = Value(items(obj));
    else if (name == "keys") *result = Value(iterate(obj));
    else if (name == "values") {
      List vals;
      for (const auto& [k, v] : obj.as_dict()) vals.push_back(v);
      *result = Value(std::move(vals));
    } else if (name == "get") {
      const Value* v = obj.find(a.get(0, "key").str());
      *result = v ? *v : a.args.size() > 1 ? a.args[1] : Value::none();
    } else return false;
    return true;
  }
  return false;
}

}  // namespace orion::jinja
