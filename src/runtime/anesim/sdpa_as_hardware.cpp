// sdpa written out as the ops the hardware effectively computes (see sdpa_as_hardware.h).
#include "runtime/anesim/sdpa_as_hardware.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace orion::runtime::anesim {
namespace {

std::string type_text(const MilValueType& t) {
  if (!t.tensor) return t.elem;
  return fmt::format("tensor<{}, [{}]>", t.elem, fmt::join(t.shape, ", "));
}

const MilValueType& type_of(const MilScan& m, const std::string& name) {
  for (const auto& [p, t] : m.params)
    if (p == name) return t;
  for (const auto& [r, t] : m.statements[m.producer.at(name)].results)
    if (r == name) return t;
  return m.params.front().second;  // unreachable after the signature check
}

std::string arg(const MilStatement& st, const char* name) {
  for (const MilArg& a : st.args)
    if (a.name == name) return a.values.at(0);
  return "";
}

// y = softmax(q·kᵀ · 1/√D) · v, with y's own name on the last op; temporaries are y_sdpa_*.
std::string expand(const MilScan& m, const MilStatement& st, const std::string& indent) {
  const std::string y = st.results.at(0).first, q = arg(st, "query"), k = arg(st, "key"), v = arg(st, "value");
  const MilValueType& qt = type_of(m, q);
  const MilValueType& kt = type_of(m, k);
  MilValueType scores = qt;  // [..., Sq, Skv]
  scores.shape.back() = kt.shape.at(kt.shape.size() - 2);
  const double scale = 1.0 / std::sqrt(double(qt.shape.back()));
  const std::string s = type_text(scores), e = qt.elem, p = y + "_sdpa_";
  auto line = [&](const std::string& text) { return indent + text + "\n"; };
  std::string out;
  out += line(fmt::format("bool {0}f = const()[name = string(\"{0}f\"), val = bool(false)];", p));
  out += line(fmt::format("bool {0}t = const()[name = string(\"{0}t\"), val = bool(true)];", p));
  out += line(fmt::format("{1} {0}qk = matmul(transpose_x = {0}f, transpose_y = {0}t, x = {2}, y = {3})[name = string(\"{0}qk\")];",
                          p, s, q, k));
  out += line(fmt::format("{1} {0}scale = const()[name = string(\"{0}scale\"), val = {1}({2:.9g})];", p, e, scale));
  out += line(fmt::format("{1} {0}scaled = mul(x = {0}qk, y = {0}scale)[name = string(\"{0}scaled\")];", p, s));
  out += line(fmt::format("int32 {0}axis = const()[name = string(\"{0}axis\"), val = int32(-1)];", p));
  out += line(fmt::format("{1} {0}probs = softmax(axis = {0}axis, x = {0}scaled)[name = string(\"{0}probs\")];", p, s));
  out += line(fmt::format("{} {} = matmul(transpose_x = {}f, transpose_y = {}f, x = {}probs, y = {})[name = string(\"{}\")];",
                          type_text(st.results.at(0).second), y, p, p, p, v, y));
  return out;
}

}  // namespace

std::string sdpa_with_mask_ignored(std::string_view text, const MilScan& m) {
  std::vector<const MilStatement*> by_line;
  for (const MilStatement& st : m.statements)
    if (st.op == "scaled_dot_product_attention") by_line.push_back(&st);
  if (by_line.empty()) return std::string(text);
  std::string out;
  int line_no = 0;
  size_t next = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (next < by_line.size() && by_line[next]->line == line_no) {
      out += expand(m, *by_line[next++], std::string(line.substr(0, line.find_first_not_of(" \t"))));
    } else {
      out.append(line);
      out += '\n';
    }
  }
  return out;
}

}  // namespace orion::runtime::anesim
