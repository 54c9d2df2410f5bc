// anesim's timing model: what one evaluation of a program would take on the real ANE, so that
// `orion bench --backend anesim` can report a predicted ANE time beside the host time. The model
// and its sources are described at the top of anesim_timing.cpp.
#pragma once
#include <cstdint>

#include "compiler/chip.h"
#include "ir/graph.h"

namespace orion::runtime::anesim {

// What one program costs per evaluation, counted once from its graph when it is compiled.
struct ProgramCost {
  double flops = 0;               // multiply-adds count 2; elementwise, reductions ~1 per element
  int ops = 0;                    // ops the ANE executes (everything but inputs and constants)
  int64_t working_set_bytes = 0;  // constants + peak live activations (annotate-sram's estimate)
  int64_t surface_bytes = 0;      // packed fp16 bytes written to inputs and read from outputs
};

// Counts flops, ops and surface bytes of g; `working_set_bytes` is annotate-sram's estimate.
ProgramCost program_cost(const ir::Graph& g, int64_t working_set_bytes);

struct TimingBreakdown {
  double dispatch_ms = 0;  // fixed cost of one evaluation request
  double compute_ms = 0;   // flops at the chip's fp16 rate × utilisation (× SRAM penalty)
  double copy_ms = 0;      // host ↔ surface copies
  double total_ms = 0;
  double utilisation = 0;  // fraction of the chip's peak the program reaches
  bool over_sram = false;  // working set beyond the chip's SRAM (C20): compute ×1.3
};

// The fraction of peak fp16 throughput a program of `ops` ops reaches (0 for none, ~0.94 from 16).
double utilisation(int ops);
TimingBreakdown predict_evaluation(const ProgramCost& cost, const compiler::ChipProfile& chip);

// Constants of the model (documented in anesim_timing.cpp).
constexpr double kPeakUtilisation = 0.94;  // DESIGN.md §2: deep programs (16–64 ops)
constexpr int kOpsForPeak = 16;
constexpr double kSramPenalty = 1.3;               // DESIGN.md §2 / C20: ~30% slower
constexpr double kSurfaceCopyBytesPerMs = 1.37e6;  // calibrated on DESIGN.md §4's 2.3 ms round trip

}  // namespace orion::runtime::anesim
