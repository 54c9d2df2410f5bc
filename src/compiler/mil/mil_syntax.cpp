// The per-op MIL argument table, type spelling and literal formatting (see mil_syntax.h).
#include "compiler/mil/mil_syntax.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "base/dtype.h"

namespace orion::compiler::mil {

using ir::Op;

namespace {

ArgSpec operand(const char* mil, int index) { return {mil, ArgKind::Operand, index}; }
ArgSpec attr(const char* mil, ArgKind kind, const char* key) { return {mil, kind, 0, key}; }
ArgSpec attr_or(const char* mil, ArgKind kind, const char* key, int64_t dflt) { return {mil, kind, 0, key, true, dflt}; }
ArgSpec fixed(const char* mil, ArgKind kind, std::vector<int64_t> v, const char* text = "") {
  return {mil, kind, 0, "", false, 0, std::move(v), text};
}

const std::vector<ArgSpec> kNone;
const std::vector<ArgSpec> kUnary = {operand("x", 0)};
const std::vector<ArgSpec> kBinary = {operand("x", 0), operand("y", 1)};
// conv(bias?, dilations, groups, pad, pad_type, strides, weight, x): Orion's conv is 1×1, so every
// geometry argument has one allowed value. A bias is emitted as MIL has it; validate-ane rejects it (C4).
const std::vector<ArgSpec> kConv = {{"bias", ArgKind::OptOperand, 2},
                                    fixed("dilations", ArgKind::FixedInts, {1, 1}),
                                    fixed("groups", ArgKind::FixedInt, {1}),
                                    fixed("pad", ArgKind::FixedInts, {0, 0, 0, 0}),
                                    fixed("pad_type", ArgKind::FixedString, {}, "valid"),
                                    fixed("strides", ArgKind::FixedInts, {1, 1}),
                                    operand("weight", 1),
                                    operand("x", 0)};
// C3: the transpose flags are named bool constants, never literals.
const std::vector<ArgSpec> kMatmul = {attr_or("transpose_x", ArgKind::AttrBool, "transpose_x", 0),
                                      attr_or("transpose_y", ArgKind::AttrBool, "transpose_y", 0), operand("x", 0),
                                      operand("y", 1)};
const std::vector<ArgSpec> kReduce = {attr("axes", ArgKind::AttrInts, "axes"),
                                      attr_or("keep_dims", ArgKind::AttrBool, "keep_dims", 1), operand("x", 0)};
const std::vector<ArgSpec> kReshape = {attr("shape", ArgKind::AttrInts, "shape"), operand("x", 0)};
const std::vector<ArgSpec> kTranspose = {attr("perm", ArgKind::AttrInts, "perm"), operand("x", 0)};
const std::vector<ArgSpec> kSplit = {attr("axis", ArgKind::AttrInt, "axis"),
                                     attr("split_sizes", ArgKind::AttrInts, "split_sizes"), operand("x", 0)};
const std::vector<ArgSpec> kPad = {attr_or("constant_val", ArgKind::AttrElemLikeX, "value", 0),
                                   fixed("mode", ArgKind::FixedString, {}, "constant"),
                                   attr("pad", ArgKind::AttrInts, "pad"), operand("x", 0)};
const std::vector<ArgSpec> kSlice = {attr("begin", ArgKind::AttrInts, "begin"), attr("end", ArgKind::AttrInts, "end"),
                                     operand("x", 0)};
const std::vector<ArgSpec> kCast = {attr("dtype", ArgKind::AttrDType, "dtype"), operand("x", 0)};
const std::vector<ArgSpec> kSoftmax = {attr_or("axis", ArgKind::AttrInt, "axis", -1), operand("x", 0)};
const std::vector<ArgSpec> kConcat = {attr("axis", ArgKind::AttrInt, "axis"),
                                      fixed("interleave", ArgKind::FixedBool, {0}),
                                      {"values", ArgKind::OperandTuple}};

}  // namespace

const std::vector<ArgSpec>& mil_args(Op op) {
  switch (op) {
    case Op::Input:
    case Op::Const:
    case Op::Neg:
    case Op::Gelu:
    case Op::Silu:
    case Op::Attention: return kNone;
    case Op::Identity:
    case Op::Relu:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Exp:
    case Op::Sqrt:
    case Op::Rsqrt: return kUnary;
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Pow: return kBinary;
    case Op::Conv1x1: return kConv;
    case Op::Matmul: return kMatmul;
    case Op::ReduceSum:
    case Op::ReduceMean:
    case Op::ReduceMax: return kReduce;
    case Op::Reshape: return kReshape;
    case Op::Transpose: return kTranspose;
    case Op::Split: return kSplit;
    case Op::Pad: return kPad;
    case Op::Slice: return kSlice;
    case Op::Cast: return kCast;
    case Op::Softmax: return kSoftmax;
    case Op::Concat: return kConcat;
  }
  return kNone;
}

std::optional<Op> op_from_mil(std::string_view mil) {
  for (int i = 0; i < ir::kNumOps; i++) {
    Op op = Op(i);
    if (op != Op::Const && !mil_args(op).empty() && mil == ir::op_info(op).mil) return op;
  }
  return std::nullopt;
}

bool is_parameter(ArgKind k) { return k != ArgKind::Operand && k != ArgKind::OptOperand && k != ArgKind::OperandTuple; }

std::string type_str(const ir::Type& t, bool verbose) {
  if (t.shape.empty() && !verbose) return ir::elem_name(t.elem);
  return fmt::format("tensor<{}, [{}]>", ir::elem_name(t.elem), fmt::join(t.shape, ", "));
}

namespace {

// Writes |v| from its scientific form "d.ddde±x" positionally when the exponent is moderate
// ("0.00001", "65504.0"), else as "d.dde-08"; always with a decimal point so it reads as a float.
std::string render(const std::string& sci, bool neg) {
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, 1) + (e > 2 ? sci.substr(2, e - 2) : "");
  int exp = std::atoi(sci.c_str() + e + 1);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string s;
  if (exp >= -7 && exp < 16) {
    if (exp < 0) {
      s = "0." + std::string(size_t(-exp - 1), '0') + digits;
    } else {
      std::string ip = digits.substr(0, std::min(digits.size(), size_t(exp) + 1));
      ip.append(size_t(exp) + 1 - ip.size(), '0');
      std::string fp = digits.size() > size_t(exp) + 1 ? digits.substr(size_t(exp) + 1) : "0";
      s = ip + "." + fp;
    }
  } else {
    s = fmt::format("{}.{}e{}", digits[0], digits.size() > 1 ? digits.substr(1) : "0", exp);
  }
  return neg ? "-" + s : s;
}

// The shortest decimal of v for which `same` holds (it reads back to the same stored bits).
template <typename Same>
std::string shortest(double v, Same same) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  // Whole numbers are written exactly ("65504.0", not the shorter "65500.0" that rounds to it).
  if (v == std::trunc(v) && std::fabs(v) < 1e15) return fmt::format("{:.1f}", v);
  for (int p = 1; p <= 17; p++) {
    std::string sci = fmt::format("{:.{}e}", std::fabs(v), p - 1);
    std::string s = render(sci, std::signbit(v));
    if (same(std::strtod(s.c_str(), nullptr))) return s;
  }
  return fmt::format("{:.17e}", v);
}

}  // namespace

std::string format_element(ir::ElemType t, const uint8_t* p) {
  switch (t) {
    case ir::ElemType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return shortest(f16_to_f32(h), [h](double d) { return f32_to_f16(float(d)) == h; });
    }
    case ir::ElemType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return shortest(f, [f](double d) {
        float g = float(d);
        return std::memcmp(&f, &g, 4) == 0;
      });
    }
    case ir::ElemType::I32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      return std::to_string(i);
    }
    case ir::ElemType::Bool: return *p ? "true" : "false";
  }
  return "?";
}

std::string value_literal(const ir::Type& t, const uint8_t* data, bool verbose) {
  size_t es = ir::elem_size(t.elem);
  if (t.shape.empty()) return fmt::format("{}({})", type_str(t, verbose), format_element(t.elem, data));
  std::string s = type_str(t, verbose) + "([";
  for (int64_t i = 0; i < t.numel(); i++) {
    if (i) s += ", ";
    s += format_element(t.elem, data + size_t(i) * es);
  }
  return s + "])";
}

bool parse_element(ir::ElemType t, std::string_view text, uint8_t* out) {
  std::string s(text);
  if (t == ir::ElemType::Bool) {
    if (s != "true" && s != "false") return false;
    *out = s == "true";
    return true;
  }
  if (s.empty()) return false;
  char* end = nullptr;
  if (t == ir::ElemType::I32) {
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (*end || errno || v < INT32_MIN || v > INT32_MAX) return false;
    int32_t i = int32_t(v);
    std::memcpy(out, &i, 4);
    return true;
  }
  double d = std::strtod(s.c_str(), &end);  // decimal, hex floats (0x1p-4), inf, nan
  if (*end) return false;
  if (t == ir::ElemType::F16) {
    uint16_t h = f32_to_f16(float(d));
    std::memcpy(out, &h, 2);
  } else {
    float f = float(d);
    std::memcpy(out, &f, 4);
  }
  return true;
}

std::vector<uint8_t> element_bytes(ir::ElemType t, double v) {
  std::vector<uint8_t> b(ir::elem_size(t));
  switch (t) {
    case ir::ElemType::F16: {
      uint16_t h = f32_to_f16(float(v));
      std::memcpy(b.data(), &h, 2);
      break;
    }
    case ir::ElemType::F32: {
      float f = float(v);
      std::memcpy(b.data(), &f, 4);
      break;
    }
    case ir::ElemType::I32: {
      int32_t i = int32_t(std::clamp(v, double(INT32_MIN), double(INT32_MAX)));
      std::memcpy(b.data(), &i, 4);
      break;
    }
    case ir::ElemType::Bool: b[0] = v != 0; break;
  }
  return b;
}

double element_value(ir::ElemType t, const uint8_t* p) {
  switch (t) {
    case ir::ElemType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return f16_to_f32(h);
    }
    case ir::ElemType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case ir::ElemType::I32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
    case ir::ElemType::Bool: return *p ? 1 : 0;
  }
  return 0;
}

bool stored_as_blob(const ir::Type& t) { return t.elem != ir::ElemType::Bool && t.numel() > kMaxInlineElements; }

}  // namespace orion::compiler::mil
