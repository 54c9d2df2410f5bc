// Weights as inputs: the kernel is compiled once with its weight constants turned into program
// inputs, and the weights are streamed through surfaces on every call — no recompiles, no compile
// budget (C9), no stale reloads (C10), at the cost of the copies (DESIGN.md §3 and §6).
//
// weights_to_inputs rewrites a graph in place. A constant W of shape [d0, d1, ...] becomes an input
// of the same name declared [1, R, 1, L] fp16 — the only shape a program boundary can have (C14),
// holding the constant's row-major values in its first d0 rows of L = numel/d0 — followed inside the
// program by a slice dropping padding rows and a reshape back to W's shape:
//
//   W: const [768, 768, 1, 1] → conv1x1(x, W)
//     →  W: input fp16[1, 768, 1, 768] → reshape [768, 768, 1, 1] → conv1x1(x, ·)
//   g: const [1, 64, 1, 1] (a norm weight; 128 bytes, below the minimum buffer, C7)
//     →  g: input fp16[1, 384, 1, 64] → slice rows [0, 1) → reshape [1, 64, 1, 1] → ...
//
// Padding rows (not the last axis) keep such an input out of legalize-ane's sequence padding,
// which pads every input sharing a sequence length with a small activation; a weight whose L equals
// an activation's sequence length is laid out as [1, numel, 1, 1] instead, for the same reason.
// Every input of a program shares one allocation size (C13), so activations travel in buffers as
// large as the largest weight.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/chip.h"
#include "ir/graph.h"
#include "ir/interpret.h"

namespace orion::runtime {

struct WeightInput {
  std::string name;   // the constant's name, now the input's (and its MIL name)
  ir::Type original;  // the constant's type
  ir::Type declared;  // the input's type: fp16 [1, R, 1, L]
};

struct WeightsToInputsOptions {
  int64_t min_elements = 2;                     // smaller constants (scalars: eps, exponents) stay baked in
  const compiler::ChipProfile* chip = nullptr;  // for the minimum buffer (C7); nullptr: default chip
};

// Turns every floating-point constant of at least min_elements elements that a live node uses into
// an input (see above); returns them in graph order.
std::vector<WeightInput> weights_to_inputs(ir::Graph& g, const WeightsToInputsOptions& options = {});

// The tensor to feed input `w`: the values of constant `c` (a node of the graph before the
// rewrite, or of an updated copy of it) in w.declared's shape, zeros after them.
ir::Tensor32 weight_input_tensor(const WeightInput& w, const ir::Node& c);

}  // namespace orion::runtime
