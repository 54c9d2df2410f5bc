// MIL emitter: an IR graph → the MIL text and weight blobs the ANE compiler takes (DESIGN.md §5).
//
//   program(1.3)
//   [buildInfo = dict<string, string>({{"coremlc-component-MIL", "3510.2.1"}, ...})]
//   {
//       func main<ios18>(tensor<fp16, [1, 768, 1, 64]> x) {
//           tensor<fp16, [256, 768, 1, 1]> w = const()[name = string("w"), val = tensor<fp16, [256, 768, 1, 1]>(BLOBFILE(path = string("@model_path/weights/w.bin"), offset = uint64(64)))];
//           tensor<int32, [2]> y_dilations = const()[name = string("y_dilations"), val = tensor<int32, [2]>([1, 1])];
//           ...
//           tensor<fp16, [1, 256, 1, 64]> y = conv(dilations = y_dilations, groups = y_groups, pad = y_pad, pad_type = y_pad_type, strides = y_strides, weight = w, x = x)[name = string("y")];
//       } -> (y);
//   }
//
// Rules of the text:
//   - one statement per line, in the graph's node order; arguments sorted by name;
//   - IR constants keep their names; op parameters (axes, perm, strides, transpose flags — C3 —, ...)
//     become named consts "<node>_<argument>" written just before the op that uses them;
//   - a split's results are named "<node>_0", "<node>_1", ...; a graph output whose name differs
//     from the value it returns gets an `identity` statement with the output's name (the hardware
//     binds outputs by these names, C6);
//   - constants go to BLOBFILE weights or inline by the policy of mil_syntax.h (stored_as_blob);
//   - the chip profile picks program version, function target and literal syntax (C18): with
//     verbose literals (M1/M2) scalar consts are spelled as rank-0 tensors,
//     `tensor<fp16, []> eps = const()[name = string("eps"), val = tensor<fp16, []>(0.00001)];`,
//     and `cast` is refused.
// The same graph and profile always give the same bytes.
#pragma once
#include "compiler/chip.h"
#include "compiler/program.h"
#include "ir/graph.h"

namespace orion::compiler {

struct EmitOptions {
  // PerConstant: one file per BLOBFILE constant, "<const name>.bin", offset 64 (the default, as the
  // ANE trainers do). Single: every constant in "weight.bin", one blob after another (as coremltools).
  enum class WeightFiles { PerConstant, Single } weight_files = WeightFiles::PerConstant;
};

// Emits g (which must verify) for the chip. Input error naming the node when an op has no MIL form
// (neg, gelu, silu, attention: run legalize-ane first) or the chip lacks it (cast on M1/M2, C18),
// or when two MIL names would collide.
CompiledProgram emit_mil(const ir::Graph& g, const ChipProfile& chip, const EmitOptions& options = {});

}  // namespace orion::compiler
