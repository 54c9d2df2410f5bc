// What the MIL emitter and the MIL parser share, so the two cannot drift apart:
//   - each IR op's MIL arguments (name, what they carry, defaults) in one table, mil_args();
//   - the spelling of types and literal values, for both chip syntaxes (rule C18);
//   - which constants live in BLOBFILE weights and which are written inline (the blob policy).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace orion::compiler::mil {

// How one MIL argument maps to the IR node.
enum class ArgKind : uint8_t {
  Operand,        // a data operand: node input `index`                          x = x
  OptOperand,     // the same, only when the node has that many inputs          bias = b
  OperandTuple,   // every input, as a tuple                                     values = (a, b)
  AttrInt,        // int32 scalar const  ↔ integer attribute `attr`             axis = y_axis
  AttrInts,       // tensor<int32, [n]>  ↔ list attribute `attr`                perm = y_perm
  AttrBool,       // bool scalar const   ↔ bool attribute `attr` (C3)           transpose_x = y_transpose_x
  AttrDType,      // string const        ↔ element-type attribute `attr`        dtype = y_dtype
  AttrElemLikeX,  // scalar of x's element type ↔ number attribute `attr`       constant_val = y_constant_val
  FixedInts,      // tensor<int32, [n]> that must equal `fixed` (1×1 conv: strides, pad, dilations)
  FixedInt,       // int32 scalar that must equal fixed[0] (groups)
  FixedBool,      // bool scalar that must equal fixed[0] != 0 (concat interleave)
  FixedString,    // string that must equal `text` (pad_type "valid", mode "constant")
};

struct ArgSpec {
  const char* mil;  // argument name, e.g. "transpose_x"
  ArgKind kind;
  int index = 0;             // Operand / OptOperand
  const char* attr = "";     // Attr*: the IR attribute
  bool has_default = false;  // Attr*: value when the attribute is absent
  int64_t dflt = 0;
  std::vector<int64_t> fixed = {};
  const char* text = "";  // FixedString
};

// The arguments of op in MIL, sorted by name (the order the emitter writes them). Empty for ops
// with no MIL form (input, const and the ops legalize-ane must rewrite: neg, gelu, silu, attention).
const std::vector<ArgSpec>& mil_args(ir::Op op);
// The IR op spelled `mil` in MIL ("conv" → conv1x1, "slice_by_index" → slice); none for "const",
// unknown names and ops that have no MIL form.
std::optional<ir::Op> op_from_mil(std::string_view mil);
bool is_parameter(ArgKind k);  // everything but the operand kinds

// --- types ---
// "tensor<fp16, [1, 768, 1, 64]>"; rank-0: "fp16", or "tensor<fp16, []>" with verbose literals.
std::string type_str(const ir::Type& t, bool verbose);

// --- literal values ---
// One element of a constant, as MIL writes it: fp16/fp32 as the shortest decimal that reads back
// to the same bits ("0.00001", "-0.5", "65504.0", "1.0e-08", "inf", "nan"), int32 in decimal,
// bool as true/false.
std::string format_element(ir::ElemType t, const uint8_t* p);
// The value literal of a constant: "fp16(0.5)" (scalar, concise), "tensor<fp16, []>(0.5)"
// (scalar, verbose), "tensor<int32, [2]>([1, 1])" (any rank ≥ 1, elements in row-major order).
std::string value_literal(const ir::Type& t, const uint8_t* data, bool verbose);
// Parses one element from its text into `out` (elem_size(t) bytes). False when the text is not a
// number of that kind or is out of range (int32).
bool parse_element(ir::ElemType t, std::string_view text, uint8_t* out);
// One element of type t holding v (rounded to nearest for fp16/fp32, truncated for int32).
std::vector<uint8_t> element_bytes(ir::ElemType t, double v);
// The element at p as a double.
double element_value(ir::ElemType t, const uint8_t* p);

// --- the blob policy ---
// A constant of the graph is stored as a BLOBFILE weight when it is an fp16, fp32 or int32 tensor
// of more than kMaxInlineElements elements (weight matrices, biases, masks, tables, small vectors).
// Scalars, bool tensors and every op parameter (axes, perm, shape, strides, transpose flags, ...)
// are written inline. This matches validate-ane's C16 count, where a tensor constant occupies a
// blob slot and an inline scalar operand occupies one too; CompiledProgram reports both counts.
constexpr int64_t kMaxInlineElements = 1;
bool stored_as_blob(const ir::Type& t);

}  // namespace orion::compiler::mil
