// Reads the signature table (mil_signatures.inc) once and checks scanned programs against it.
#include "runtime/anesim/mil_signatures.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "base/error.h"

namespace orion::runtime::anesim {
namespace {

constexpr const char* kTable =
#include "runtime/anesim/mil_signatures.inc"
    ;

int opset_number(const std::string& opset) {  // "ios18" -> 18, anything else -> 0
  return opset.size() > 3 && opset.starts_with("ios") ? std::atoi(opset.c_str() + 3) : 0;
}

struct InputSpec {
  std::string name;
  int from = 0, to = 0;  // opset numbers; to 0: no end
  bool optional = false, tuple = false, must_be_const = false;
  std::vector<std::string> types;  // element types, resolved from the op's domain when it named one
  std::string domain;              // "T" when the types are the op's type domain, else ""
};

struct Table {
  std::map<std::string, std::vector<std::string>> program_opsets;  // "1.3" -> {"ios18"}
  std::map<std::string, std::vector<InputSpec>> ops;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// One `op` record: OP FROM[-TO] INPUT KIND TYPES.
InputSpec read_input(std::istringstream& in, const std::map<std::string, std::vector<std::string>>& domains,
                     const std::string& op) {
  std::string range, kind, types;
  InputSpec s;
  in >> range >> s.name >> kind >> types;
  const size_t dash = range.find('-');
  s.from = opset_number(range.substr(0, dash));
  s.to = dash == std::string::npos ? 0 : opset_number(range.substr(dash + 1));
  if (s.name.ends_with('?')) s.optional = true, s.name.pop_back();
  if (s.name.ends_with('*')) s.tuple = true, s.name.pop_back();
  s.must_be_const = kind == "const";
  auto d = domains.find(op + " " + types);
  s.types = d != domains.end() ? d->second : split_commas(types);
  if (d != domains.end()) s.domain = types;
  ORION_CHECK(s.from > 0 && (kind == "const" || kind == "any") && !s.types.empty(), "bad signature record for {}", op);
  return s;
}

const Table& table() {
  static const Table t = [] {
    Table t;
    std::map<std::string, std::vector<std::string>> domains;  // "conv T" -> element types
    std::istringstream lines(kTable);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream in(line);
      std::string kind, a, b;
      if (!(in >> kind) || kind.starts_with("#")) continue;
      if (kind == "program") {
        in >> a;
        for (std::string opset; in >> opset;) t.program_opsets[a].push_back(opset);
      } else if (kind == "types") {
        std::string elems;
        in >> a >> b >> elems;
        domains[a + " " + b] = split_commas(elems);
      } else {
        ORION_CHECK(kind == "op", "unknown signature record '{}'", kind);
        in >> a;
        t.ops[a].push_back(read_input(in, domains, a));
      }
    }
    return t;
  }();
  return t;
}

bool in_opset(const InputSpec& s, int opset) { return opset >= s.from && (s.to == 0 || opset <= s.to); }

// The element type and const-ness of a value the statement reads.
struct ValueInfo {
  std::string elem, producer_op;
  bool defined = false;
};
ValueInfo value_info(const MilScan& m, const std::string& name, size_t before) {
  for (const auto& [p, t] : m.params)
    if (p == name) return {t.elem, "input", true};
  auto it = m.producer.find(name);
  if (it == m.producer.end() || it->second >= before) return {};
  const MilStatement& st = m.statements[it->second];
  for (const auto& [r, t] : st.results)
    if (r == name) return {t.elem, st.op, true};
  return {};
}

// The problems of one op statement against the inputs its opset defines.
void check_statement(const MilScan& m, size_t index, const std::vector<InputSpec>& spec, int opset,
                     std::vector<std::string>& out) {
  const MilStatement& st = m.statements[index];
  const std::string where = fmt::format("line {}: {} '{}'", st.line, st.op, st.results.at(0).first);
  std::set<std::string> given;
  std::map<std::string, std::string> domain_elem;  // the element type each type domain took
  for (const MilArg& a : st.args) {
    auto s = std::find_if(spec.begin(), spec.end(), [&](const InputSpec& i) { return i.name == a.name && in_opset(i, opset); });
    if (s == spec.end()) {
      out.push_back(fmt::format("{}: {} has no input '{}' in ios{}", where, st.op, a.name, opset));
      continue;
    }
    if (!given.insert(a.name).second) out.push_back(fmt::format("{}: input '{}' given twice", where, a.name));
    if (a.tuple != s->tuple)
      out.push_back(fmt::format("{}: input '{}' must be {}", where, a.name, s->tuple ? "a tuple" : "one value"));
    for (const std::string& v : a.values) {
      ValueInfo info = value_info(m, v, index);
      if (!info.defined) {
        out.push_back(fmt::format("{}: input '{}' reads '{}', which is not defined before it", where, a.name, v));
        continue;
      }
      if (s->must_be_const && info.producer_op != "const")
        out.push_back(fmt::format("{}: input '{}' must be a const ('{}' is made by {})", where, a.name, v, info.producer_op));
      if (std::find(s->types.begin(), s->types.end(), info.elem) == s->types.end())
        out.push_back(fmt::format("{}: input '{}' is {} ('{}'); the op takes {}", where, a.name, info.elem, v,
                                  fmt::join(s->types, ", ")));
      // Inputs of one type domain must agree (x and y of add are both fp16, or both fp32).
      if (!s->domain.empty()) {
        auto [it, fresh] = domain_elem.emplace(s->domain, info.elem);
        if (!fresh && it->second != info.elem)
          out.push_back(fmt::format("{}: input '{}' is {}, another input of its type is {}", where, a.name, info.elem,
                                    it->second));
      }
    }
  }
  for (const InputSpec& s : spec)
    if (in_opset(s, opset) && !s.optional && !given.count(s.name))
      out.push_back(fmt::format("{}: required input '{}' is missing", where, s.name));
}

}  // namespace

std::string version_problem(const std::string& program_version, const std::string& opset,
                            const compiler::ChipProfile& chip) {
  const Table& t = table();
  auto p = t.program_opsets.find(program_version);
  if (p == t.program_opsets.end()) {
    std::vector<std::string> known;
    for (const auto& [v, opsets] : t.program_opsets) known.push_back(v);
    return fmt::format("program({}) is not a MIL program version (known: {})", program_version, fmt::join(known, ", "));
  }
  if (std::find(p->second.begin(), p->second.end(), opset) == p->second.end())
    return fmt::format("program({}) carries opsets {}, not func main<{}>", program_version, fmt::join(p->second, ", "),
                       opset);
  if (std::strtod(program_version.c_str(), nullptr) > std::strtod(chip.program_version.c_str(), nullptr))
    return fmt::format("program({}) is newer than {} accepts (program({}))", program_version, chip.name,
                       chip.program_version);
  if (opset_number(opset) > opset_number(chip.function_target))
    return fmt::format("opset {} is newer than {} accepts ({})", opset, chip.name, chip.function_target);
  return "";
}

std::vector<std::string> signature_problems(const MilScan& m) {
  std::vector<std::string> out;
  const int opset = opset_number(m.function_target);
  for (size_t i = 0; i < m.statements.size(); i++) {
    const MilStatement& st = m.statements[i];
    if (st.op == "const") continue;
    auto it = table().ops.find(st.op);
    const bool known = it != table().ops.end() &&
                       std::any_of(it->second.begin(), it->second.end(), [&](const InputSpec& s) { return in_opset(s, opset); });
    if (!known) {
      out.push_back(fmt::format("line {}: op '{}' is not in opset {}", st.line, st.op, m.function_target));
      continue;
    }
    check_statement(m, i, it->second, opset, out);
  }
  return out;
}

std::vector<std::string> ops_of_opset(const std::string& opset) {
  std::vector<std::string> out;
  for (const auto& [op, spec] : table().ops)
    if (std::any_of(spec.begin(), spec.end(), [&](const InputSpec& s) { return in_opset(s, opset_number(opset)); }))
      out.push_back(op);
  return out;
}

}  // namespace orion::runtime::anesim
