// The IR text printer (the grammar is in text.h; the parser is text_parse.cpp).
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "base/dtype.h"
#include "base/file.h"
#include "ir/text.h"

namespace orion::ir {

uint64_t fnv1a64(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;                                      // FNV offset basis
  for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 0x100000001b3ull;  // FNV prime
  return h;
}

namespace {

bool is_identifier(const std::string& s) {
  bool ok = !s.empty() && (std::isalpha(uint8_t(s[0])) || s[0] == '_');
  for (char c : s) ok = ok && (std::isalnum(uint8_t(c)) || c == '_' || c == '@');
  return ok;
}

// "..." with the escapes the parser understands: \" \\ and \XX for control bytes.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    uint8_t u = uint8_t(c);
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (u < 0x20 || u == 0x7f) out += fmt::format("\\{:02X}", u);
    else out += c;
  }
  return out + "\"";
}

std::string name_text(const std::string& s) { return is_identifier(s) ? s : quote(s); }

// Shortest spelling that reads back to the same value, always recognisable as a float: fmt's
// default format is the shortest round-trip one; "1" becomes "1.0".
template <typename F>
std::string float_text(F v) {
  if (std::isnan(v)) return "nan";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // 'n' covers inf
  return s;
}

std::string ints_text(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

std::string attr_text(const AttrValue& v) {
  struct Visit {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return float_text(d); }
    std::string operator()(const std::string& s) const { return quote(s); }
    std::string operator()(const std::vector<int64_t>& l) const { return ints_text(l); }
  };
  return std::visit(Visit{}, v);
}

std::string type_text(const Type& t) { return fmt::format("{}{}", elem_name(t.elem), ints_text(t.shape)); }

// The single value every element of `bytes` holds, spelled for splat<...>; nullopt when the
// elements differ, when there are none, or when the value would not read back bit for bit.
std::optional<std::string> splat_text(ElemType elem, const std::vector<uint8_t>& bytes) {
  size_t es = elem_size(elem);
  if (bytes.empty()) return std::nullopt;
  for (size_t i = es; i < bytes.size(); i += es)
    if (std::memcmp(&bytes[0], &bytes[i], es) != 0) return std::nullopt;
  // A NaN reads back bit for bit only as the two the parser makes from "nan" and "-nan" (any other
  // payload prints dense; a 32 MiB splat of nan printed dense was 64 MB of text to parse again).
  const float nan = float(NAN), minus_nan = float(-NAN);
  switch (elem) {
    case ElemType::F16: {
      uint16_t h;
      std::memcpy(&h, bytes.data(), 2);
      const float f = f16_to_f32(h);
      if (!std::isnan(f)) return float_text(f);
      if (h == f32_to_f16(nan)) return std::string("nan");
      if (h == f32_to_f16(minus_nan)) return std::string("-nan");
      return std::nullopt;
    }
    case ElemType::F32: {
      float f;
      std::memcpy(&f, bytes.data(), 4);
      if (!std::isnan(f)) return float_text(f);
      if (std::memcmp(&f, &nan, 4) == 0) return std::string("nan");
      if (std::memcmp(&f, &minus_nan, 4) == 0) return std::string("-nan");
      return std::nullopt;
    }
    case ElemType::I32: {
      int32_t i;
      std::memcpy(&i, bytes.data(), 4);
      return std::to_string(i);
    }
    case ElemType::Bool:
      if (bytes[0] > 1) return std::nullopt;
      return std::string(bytes[0] ? "true" : "false");
  }
  return std::nullopt;
}

std::string data_text(const Node& n, const PrintOptions& opt) {
  const std::vector<uint8_t>& bytes = n.data->bytes;
  if (auto s = splat_text(n.results.at(0).elem, bytes)) return fmt::format("splat<{}>", *s);
  if (opt.elide_constants_above && bytes.size() > *opt.elide_constants_above)
    return fmt::format("blob<{} bytes, fnv1a=0x{:016X}>", bytes.size(), fnv1a64(bytes.data(), bytes.size()));
  std::string hex = "0x";
  hex.reserve(2 + 2 * bytes.size());
  static const char kDigits[] = "0123456789ABCDEF";
  for (uint8_t b : bytes) hex += kDigits[b >> 4], hex += kDigits[b & 15];
  return fmt::format("dense<\"{}\">", hex);
}

std::string value_text(const Graph& g, Value v) {
  const Node& d = g.node(v);
  if (d.results.size() == 1 && v.result == 0) return "%" + d.name;
  return fmt::format("%{}#{}", d.name, v.result);
}

std::string node_text(const Graph& g, const Node& n, const PrintOptions& opt) {
  std::string s = "%" + n.name;
  if (n.results.size() != 1) s += fmt::format(":{}", n.results.size());
  s += " = ";
  s += op_info(n.op).name;
  if (n.op == Op::Const) s += " " + (n.data ? data_text(n, opt) : std::string("dense<\"0x\">"));
  if (n.op != Op::Input && n.op != Op::Const) {
    std::vector<std::string> ins;
    for (Value v : n.inputs) ins.push_back(value_text(g, v));
    s += fmt::format("({})", fmt::join(ins, ", "));
  }
  if (!n.attrs.empty()) {
    std::vector<std::string> as;
    for (const auto& [k, v] : n.attrs) as.push_back(k + " = " + attr_text(v));
    s += fmt::format(" {{{}}}", fmt::join(as, ", "));
  }
  std::vector<std::string> ts;
  for (const Type& t : n.results) ts.push_back(type_text(t));
  return s + " : " + fmt::format("{}", fmt::join(ts, ", "));
}

}  // namespace

std::string print_graph(const Graph& g, const PrintOptions& options) {
  std::string out = fmt::format("graph {} {{\n", name_text(g.name()));
  for (const Node& n : g.nodes())
    if (!n.dead) out += "  " + node_text(g, n, options) + "\n";
  std::vector<std::string> outs;
  for (const GraphOutput& o : g.outputs())
    outs.push_back(fmt::format("%{} = {}", name_text(o.name), value_text(g, o.value)));
  out += outs.empty() ? "  return\n" : fmt::format("  return {}\n", fmt::join(outs, ", "));
  return out + "}\n";
}

Graph parse_graph_file(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_graph(file->text(), path);
}

}  // namespace orion::ir
