// anesim's fast ops: the reference interpreter's definitions (ir::eval_op, ir::unary_value)
// evaluated in vectorised, multithreaded loops, with the fp16 rounding of an elementwise result
// done while each piece is still in cache.
//
// Same bits as eval_op followed by rounding: add, sub and mul are single IEEE operations on the
// same operand pairs; the unary ops call the same scalar formula on every element; softmax and the
// reductions sum every output's terms in double in the same (ascending) order. Only the loops
// around them change (broadcast axes folded into a few strided rows instead of an index walk per
// element, work shared among threads, softmax's exponentials computed once instead of twice).
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/interpret.h"

namespace orion::runtime::anesim {

// Evaluates `op` (with its attributes; `node` names it in errors) into out when it is one handled
// here — add, sub, mul with numpy broadcasting; neg, relu, tanh, sigmoid, exp, sqrt, rsqrt, gelu,
// silu; softmax; reduce_sum / mean / max over neighbouring axes — and returns true; the result is
// rounded to fp16 when `result` is fp16-typed. Returns false (out untouched) otherwise.
bool eval_fast_op(ir::Op op, const std::vector<const ir::Tensor32*>& in, const ir::Attrs& attrs, const ir::Type& result,
                  const std::string& node, ir::Tensor32& out);

}  // namespace orion::runtime::anesim
