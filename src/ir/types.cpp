// The op table, element types and attribute helpers of the IR.
#include <fmt/format.h>

#include "base/error.h"
#include "ir/graph.h"

namespace orion::ir {

namespace {
const OpInfo kOps[] = {
#define OP(e, name, mil, mn, mx, flags) {name, mil, mn, mx, flags},
#include "ir/ops.def"
#undef OP
};
}  // namespace

const OpInfo& op_info(Op op) { return kOps[size_t(op)]; }

std::optional<Op> op_from_name(const std::string& name) {
  for (int i = 0; i < kNumOps; i++)
    if (name == kOps[i].name) return Op(i);
  return std::nullopt;
}

const char* elem_name(ElemType t) {
  switch (t) {
    case ElemType::F16: return "fp16";
    case ElemType::F32: return "fp32";
    case ElemType::I32: return "int32";
    case ElemType::Bool: return "bool";
  }
  return "?";
}

std::optional<ElemType> elem_from_name(const std::string& s) {
  for (ElemType t : {ElemType::F16, ElemType::F32, ElemType::I32, ElemType::Bool})
    if (s == elem_name(t)) return t;
  return std::nullopt;
}

size_t elem_size(ElemType t) {
  switch (t) {
    case ElemType::F16: return 2;
    case ElemType::F32: return 4;
    case ElemType::I32: return 4;
    case ElemType::Bool: return 1;
  }
  return 0;
}

int64_t Type::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Type::str() const { return fmt::format("{}[{}]", elem_name(elem), fmt::join(shape, ", ")); }

namespace {
template <typename T>
const T* get_attr(const Attrs& a, const std::string& key, const std::string& node, const char* want) {
  auto it = a.find(key);
  if (it == a.end()) return nullptr;
  const T* v = std::get_if<T>(&it->second);
  if (!v) throw Error(ErrorKind::Input, fmt::format("attribute '{}' must be {}", key, want), {{}, node, -1, {}});
  return v;
}
[[noreturn]] void missing(const std::string& key, const std::string& node) {
  throw Error(ErrorKind::Input, fmt::format("missing attribute '{}'", key), {{}, node, -1, {}});
}
}  // namespace

int64_t attr_int(const Attrs& a, const std::string& key, const std::string& node, std::optional<int64_t> dflt) {
  if (auto* v = get_attr<int64_t>(a, key, node, "an integer")) return *v;
  if (!dflt) missing(key, node);
  return *dflt;
}

bool attr_bool(const Attrs& a, const std::string& key, const std::string& node, std::optional<bool> dflt) {
  if (auto* v = get_attr<bool>(a, key, node, "a bool")) return *v;
  if (!dflt) missing(key, node);
  return *dflt;
}

double attr_float(const Attrs& a, const std::string& key, const std::string& node, std::optional<double> dflt) {
  auto it = a.find(key);
  if (it != a.end() && std::holds_alternative<int64_t>(it->second)) return double(std::get<int64_t>(it->second));
  if (auto* v = get_attr<double>(a, key, node, "a number")) return *v;
  if (!dflt) missing(key, node);
  return *dflt;
}

std::vector<int64_t> attr_ints(const Attrs& a, const std::string& key, const std::string& node,
                               std::optional<std::vector<int64_t>> dflt) {
  if (auto* v = get_attr<std::vector<int64_t>>(a, key, node, "a list of integers")) return *v;
  if (!dflt) missing(key, node);
  return *dflt;
}

}  // namespace orion::ir
