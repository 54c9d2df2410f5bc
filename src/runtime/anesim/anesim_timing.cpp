// anesim's timing model: the time one evaluation would take on the ANE.
//
//   total = dispatch + compute + copy
//   dispatch = chip.dispatch_ms                        (~0.095 ms per evaluation on M4, DESIGN.md §2)
//   compute  = flops / (chip.fp16_tflops · utilisation(ops)) × (1.3 if working set > chip.sram_bytes)
//   copy     = packed surface bytes (inputs written + outputs read) / kSurfaceCopyBytesPerMs
//
// Sources and assumptions:
//   - Peak: ~19 TFLOPS fp16 measured on M4 (DESIGN.md §2; the 38 TOPS figure is int8 marketing),
//     taken per chip from ChipProfile::fp16_tflops.
//   - Utilisation: "deep programs (16–64 ops) reach ~94% utilisation; a few-op program is
//     dominated by dispatch" (DESIGN.md §2). We model the ramp as 0.94·√(ops/16), capped at 0.94
//     from 16 ops: a single conv keeps only a fraction of the 16 cores' pipelines busy, because
//     the ANE overlaps one op's weight streaming with the previous op's compute. The square root is
//     our choice (no public measurement of the ramp); it is monotone and meets both figures.
//   - SRAM: 32 MB on chip; working sets beyond it "run ~30% slower" (DESIGN.md §2, C20). The
//     working set is annotate-sram's estimate (constants + peak live activations).
//   - Copies: DESIGN.md §4 reports ~2.3 ms for an IOSurface round trip. We read that as GPT-2's
//     largest boundary, one [1, 768, 1, 1024] fp16 buffer written and one read (2 × 1.5 MiB), which
//     gives ~1.37 GB/s including locking and the host's fp32 ↔ fp16 conversion. This is the least
//     certain figure of the model; it only moves programs with large boundaries.
// The model predicts; it never sleeps. Counters accumulate predictions (DriverCounters).
#include "runtime/anesim/anesim_timing.h"

#include <algorithm>
#include <cmath>

namespace orion::runtime::anesim {
namespace {

using ir::Op;

double numel(const ir::Type& t) { return double(t.numel()); }

// The flops of one node; layout ops move data and count none (their cost is in the op count).
double node_flops(const ir::Graph& g, const ir::Node& n) {
  const double out = n.results.empty() ? 0.0 : numel(n.results[0]);
  switch (n.op) {
    case Op::Input:
    case Op::Const:
    case Op::Identity:
    case Op::Reshape:
    case Op::Transpose:
    case Op::Split:
    case Op::Pad:
    case Op::Slice:
    case Op::Cast:
    case Op::Concat: return 0.0;
    case Op::Conv1x1: {
      const double cin = double(g.type(n.inputs[1]).shape[1]);
      return 2.0 * out * cin + (n.inputs.size() == 3 ? out : 0.0);
    }
    case Op::Matmul: {
      const ir::Type& x = g.type(n.inputs[0]);
      const size_t r = x.shape.size();
      const bool tx = ir::attr_bool(n.attrs, "transpose_x", n.name, false);
      const double k = double(tx ? x.shape[r - 2] : x.shape[r - 1]);
      return 2.0 * out * k;
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Neg:
    case Op::Relu:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Exp:
    case Op::Pow:
    case Op::Sqrt:
    case Op::Rsqrt: return out;
    case Op::ReduceSum:
    case Op::ReduceMean:
    case Op::ReduceMax: return numel(g.type(n.inputs[0]));
    case Op::Softmax: return 3.0 * out;  // max, exp and sum, divide
    case Op::Gelu: return 8.0 * out;     // tanh form: cube, fma, tanh, scale
    case Op::Silu: return 2.0 * out;
    case Op::Attention: {
      // q [.., S, D], k [.., T, D]: scores and the weighted sum are each 2·S·T·D per batch.
      const ir::Type& k = g.type(n.inputs[1]);
      return 4.0 * out * double(k.shape[k.shape.size() - 2]);
    }
  }
  return 0.0;
}

}  // namespace

ProgramCost program_cost(const ir::Graph& g, int64_t working_set_bytes) {
  ProgramCost c;
  c.working_set_bytes = working_set_bytes;
  for (const ir::Node& n : g.nodes()) {
    if (n.dead) continue;
    if (n.op == Op::Input) c.surface_bytes += int64_t(n.results[0].bytes());
    if (n.op == Op::Input || n.op == Op::Const) continue;
    c.ops++;
    c.flops += node_flops(g, n);
  }
  for (const ir::GraphOutput& o : g.outputs()) c.surface_bytes += int64_t(g.type(o.value).bytes());
  return c;
}

double utilisation(int ops) {
  if (ops <= 0) return 0.0;
  return kPeakUtilisation * std::min(1.0, std::sqrt(double(ops) / kOpsForPeak));
}

TimingBreakdown predict_evaluation(const ProgramCost& cost, const compiler::ChipProfile& chip) {
  TimingBreakdown t;
  t.dispatch_ms = chip.dispatch_ms;
  t.utilisation = utilisation(cost.ops);
  const double flops_per_ms = chip.fp16_tflops * 1e12 / 1e3;
  if (cost.flops > 0 && t.utilisation > 0) t.compute_ms = cost.flops / (flops_per_ms * t.utilisation);
  t.over_sram = cost.working_set_bytes > chip.sram_bytes;
  if (t.over_sram) t.compute_ms *= kSramPenalty;
  t.copy_ms = double(cost.surface_bytes) / kSurfaceCopyBytesPerMs;
  t.total_ms = t.dispatch_ms + t.compute_ms + t.copy_ms;
  return t;
}

}  // namespace orion::runtime::anesim
