// anesim's timing model: the time one evaluation would take on the ANE, built from the chip's
// published parameters (ChipTiming: compiler/chip.cpp and the table below; each with its source
// in docs/ane-timing.md).
//
//   total    = dispatch + max(compute, memory) + copy
//   dispatch = dispatch_ms: the fixed cost of one evaluation request (~0.095 ms on M4)
//   compute  = flops / (fp16_tflops · utilisation(ops))
//   memory   = DRAM bytes / dram_gbps, overlapped with compute (a roofline: the ANE streams
//              the next weights while it computes), where the DRAM bytes are
//                - the program's constants, unless it was the last program evaluated and they are
//                  still in SRAM (a decode step cycles through 25 programs of ~7 MB: every one
//                  fetches its weights; a benchmark repeating one program fetches none);
//                - for a resident program, the part of its working set beyond SRAM (weight
//                  streaming: what does not fit is fetched on every evaluation);
//                - activations alone beyond SRAM, written out and read back (×2).
//   copy     = surface bytes / host_copy_gbps: the host's fp32 ↔ packed fp16 copies.
//
// Utilisation: "deep programs (16–64 ops) reach ~94% utilisation; a few-op program is dominated
// by dispatch" (DESIGN.md §2). We model the ramp as 0.94·√(ops/16), capped at 0.94 from 16 ops;
// the square root is our choice (no public measurement of the ramp).
//
// Compile and load: compile_ms_per_program per program (the ANE compiler runs on the host) plus
// the load of its weights at load_gbps; a delta reload is the load alone.
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

// The parameters that are not in the chip profiles. Fitted (docs/ane-timing.md says on what):
// host copies and load rate on the original Orion's M4 Max figures, compile per program on M4 Max
// and M1 Max; DRAM bandwidth as ANEMLL-Bench measured it. m2 borrows m1's compile cost, m3 and m5
// borrow m4's.
struct NamedTiming {
  const char* chip;
  double dram_gbps, compile_ms_per_program;
};
constexpr NamedTiming kTimingTable[] = {
    {"m1", 54.6, 110.1}, {"m2", 62.0, 110.1}, {"m3", 120.2, 32.0}, {"m4", 118.9, 32.0}, {"m5", 70.2, 32.0},
};
constexpr double kHostCopyGbps = 1.15;  // fitted: the original's GPT-2 decode, 5.76 ms/token
constexpr double kLoadGbps = 0.6877;    // fitted: the original's 494 ms delta reload of 340 MB

// GB/s as bytes per millisecond.
double bytes_per_ms(double gbps) { return gbps * 1e6; }

}  // namespace

ProgramCost program_cost(const ir::Graph& g, int64_t working_set_bytes) {
  ProgramCost c;
  c.working_set_bytes = working_set_bytes;
  for (const ir::Node& n : g.nodes()) {
    if (n.dead) continue;
    if (n.op == Op::Input) c.surface_bytes += int64_t(n.results[0].bytes());
    if (n.op == Op::Const) c.constant_bytes += int64_t(n.results[0].numel()) * 2;  // fp16 on the ANE
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

ChipTiming chip_timing(const compiler::ChipProfile& chip) {
  NamedTiming row = kTimingTable[3];  // m4
  for (const NamedTiming& t : kTimingTable)
    if (chip.name == t.chip) row = t;
  return {chip.fp16_tflops, chip.dispatch_ms,           chip.sram_bytes, row.dram_gbps,
          kHostCopyGbps,    row.compile_ms_per_program, kLoadGbps};
}

int64_t dram_bytes(const ProgramCost& cost, int64_t sram_bytes, bool weights_resident) {
  const int64_t activations = std::max<int64_t>(0, cost.working_set_bytes - cost.constant_bytes);
  const int64_t beyond_sram = std::max<int64_t>(0, cost.working_set_bytes - sram_bytes);
  const int64_t weights = weights_resident ? std::min(cost.constant_bytes, beyond_sram) : cost.constant_bytes;
  return weights + 2 * std::max<int64_t>(0, activations - sram_bytes);
}

TimingBreakdown predict_evaluation(const ProgramCost& cost, const compiler::ChipProfile& chip, bool weights_resident) {
  return predict_evaluation(cost, chip_timing(chip), weights_resident);
}

TimingBreakdown predict_evaluation(const ProgramCost& cost, const ChipTiming& chip, bool weights_resident) {
  TimingBreakdown t;
  t.dispatch_ms = chip.dispatch_ms;
  t.utilisation = utilisation(cost.ops);
  const double flops_per_ms = chip.fp16_tflops * 1e12 / 1e3;
  if (cost.flops > 0 && t.utilisation > 0) t.compute_ms = cost.flops / (flops_per_ms * t.utilisation);
  t.over_sram = cost.working_set_bytes > chip.sram_bytes;
  t.dram_bytes = dram_bytes(cost, chip.sram_bytes, weights_resident);
  t.memory_ms = double(t.dram_bytes) / bytes_per_ms(chip.dram_gbps);
  t.copy_ms = surface_copy_ms(double(cost.surface_bytes), chip);
  t.total_ms = t.dispatch_ms + std::max(t.compute_ms, t.memory_ms) + t.copy_ms;
  return t;
}

double surface_copy_ms(double bytes, const ChipTiming& chip) { return bytes / bytes_per_ms(chip.host_copy_gbps); }

double reload_ms(double weight_bytes, const ChipTiming& chip) { return weight_bytes / bytes_per_ms(chip.load_gbps); }

double compile_and_load_ms(int programs, double weight_bytes, const ChipTiming& chip) {
  return programs * chip.compile_ms_per_program + reload_ms(weight_bytes, chip);
}

}  // namespace orion::runtime::anesim
