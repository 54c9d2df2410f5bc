// The reference interpreter of the IR: the executable definition of what every op of ops.def
// computes (like tinygrad's emulator). It is written to be obviously correct, not fast: one small
// function per op over plain row-major fp32 tensors.
//
// Numerics: every value is held as fp32 (int32 and bool values as the floats they equal). Sums —
// matmul, conv1x1, reductions, softmax denominators — are accumulated in double and rounded once,
// so a result does not depend on summation order. With InterpretOptions::round_fp16, every result
// whose IR type is fp16 (inputs included) is rounded to the nearest fp16 (ties to even, overflow to
// ±inf) after its op, which is the storage semantics of the ANE: this mode is the numerical core of
// anesim. Without it, fp16-typed values keep fp32 precision (constants still hold the fp16 values
// they were stored as).
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace orion::ir {

// A row-major fp32 tensor (for the interpreter and for tests).
struct Tensor32 {
  std::vector<int64_t> shape;
  std::vector<float> data;

  Tensor32() = default;
  explicit Tensor32(std::vector<int64_t> shape, float fill = 0.0f);
  Tensor32(std::vector<int64_t> shape, std::vector<float> values);  // ORION_CHECKs the size
  int64_t numel() const { return int64_t(data.size()); }
};

struct InterpretOptions {
  bool round_fp16 = false;  // round every fp16-typed result to fp16 (the ANE's storage precision)
};

// Evaluates g. `inputs` maps every input node's name to a tensor of exactly its declared shape.
// Returns the graph outputs in g.outputs() order. Input errors name the missing or misshapen input.
std::vector<Tensor32> interpret(const Graph& g, const std::map<std::string, Tensor32>& inputs, InterpretOptions opt = {});
// The same, keyed by output name.
std::map<std::string, Tensor32> interpret_named(const Graph& g, const std::map<std::string, Tensor32>& inputs,
                                                InterpretOptions opt = {});

// The values of a constant node (fp16, fp32, int32 or bool bytes) as fp32.
Tensor32 const_values(const Node& n);

// One op applied to input tensors; `results` are the node's result types (shapes of the outputs).
// This is what interpret() calls per node; anesim can call it directly.
std::vector<Tensor32> eval_op(Op op, const std::vector<const Tensor32*>& in, const Attrs& attrs,
                              const std::vector<Type>& results, const std::string& node_name);

// What the elementwise unary op `op` (Neg, Relu, Tanh, Sigmoid, Exp, Sqrt, Rsqrt, Gelu, Silu)
// computes on one element: the definition eval_op applies, and anesim's faster loops too.
// Inline, so that a caller passing a constant op gets the bare formula in its loop.
inline float unary_value(Op op, float v) {
  const auto sigmoid = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  switch (op) {
    case Op::Neg: return -v;
    case Op::Relu: return v > 0.0f ? v : 0.0f;
    case Op::Tanh: return std::tanh(v);
    case Op::Sigmoid: return sigmoid(v);
    case Op::Exp: return std::exp(v);
    case Op::Sqrt: return std::sqrt(v);
    case Op::Rsqrt: return 1.0f / std::sqrt(v);
    case Op::Gelu: return 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    case Op::Silu: return v * sigmoid(v);
    default: return v;
  }
}

// x rounded to the nearest fp16 value, returned as fp32.
float round_to_fp16(float x);

}  // namespace orion::ir
