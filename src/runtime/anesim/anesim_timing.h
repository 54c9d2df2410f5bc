// anesim's timing model: what one evaluation of a program would take on the real ANE, and what
// compiling and loading programs would take, so that `orion bench --backend anesim` and the
// training report can give a predicted ANE time beside the host time. The model, its terms and
// the public source of every per-chip parameter are in docs/ane-timing.md; peak FLOP/s, dispatch
// and SRAM live in the chip profiles (compiler/chip.cpp), the rest in anesim_timing.cpp.
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
  int64_t constant_bytes = 0;     // the program's weights (fp16 constants), fetched from DRAM
};

// Counts flops, ops, constants and surface bytes of g; `working_set_bytes` is annotate-sram's estimate.
ProgramCost program_cost(const ir::Graph& g, int64_t working_set_bytes);

struct TimingBreakdown {
  double dispatch_ms = 0;  // fixed cost of one evaluation request
  double compute_ms = 0;   // flops at the chip's fp16 rate × utilisation
  double memory_ms = 0;    // bytes fetched from DRAM (weights not resident, spill beyond SRAM)
  double copy_ms = 0;      // host ↔ surface copies
  double total_ms = 0;     // dispatch + max(compute, memory) + copy
  double utilisation = 0;  // fraction of the chip's peak the program reaches
  bool over_sram = false;  // working set beyond the chip's SRAM (C20): the excess streams
  int64_t dram_bytes = 0;  // what memory_ms fetches
};

// Everything the model knows about one chip.
struct ChipTiming {
  double fp16_tflops = 0;             // peak fp16 throughput (ChipProfile)
  double dispatch_ms = 0;             // fixed cost of one evaluation request (ChipProfile)
  int64_t sram_bytes = 0;             // on-chip SRAM (ChipProfile)
  double dram_gbps = 0;               // DRAM bandwidth the ANE reaches (the weights it fetches)
  double host_copy_gbps = 0;          // host fp32 <-> packed fp16 surface copies
  double compile_ms_per_program = 0;  // the ANE compiler, run on the host, per program
  double load_gbps = 0;               // load/reload: weight files written and handed to the ANE
};
// The profile's figures and anesim_timing.cpp's table for its name (a profile of another name,
// such as a test's copy of m4 under a new name, gets m4's).
ChipTiming chip_timing(const compiler::ChipProfile& chip);

// The fraction of peak fp16 throughput a program of `ops` ops reaches (0 for none, ~0.94 from 16).
double utilisation(int ops);

// One evaluation. `weights_resident`: the same program was the last one evaluated, so the part
// of its constants that fits in SRAM is still there; otherwise all of them come from DRAM.
TimingBreakdown predict_evaluation(const ProgramCost& cost, const ChipTiming& chip, bool weights_resident = false);
TimingBreakdown predict_evaluation(const ProgramCost& cost, const compiler::ChipProfile& chip,
                                   bool weights_resident = false);

// The DRAM traffic of one evaluation: constants not resident, plus (both ways) whatever part of the
// working set exceeds the chip's SRAM.
int64_t dram_bytes(const ProgramCost& cost, int64_t sram_bytes, bool weights_resident);

// Host time to copy `bytes` between host tensors and packed fp16 surfaces (either direction).
double surface_copy_ms(double bytes, const ChipTiming& chip);
// Compiling `programs` programs holding `weight_bytes` of constants, then loading them.
double compile_and_load_ms(int programs, double weight_bytes, const ChipTiming& chip);
// Unload, rewrite the weight files and load again (delta reload): no compile.
double reload_ms(double weight_bytes, const ChipTiming& chip);

// Constants of the model shared by every chip (sources in docs/ane-timing.md).
constexpr double kPeakUtilisation = 0.94;  // DESIGN.md §2: deep programs (16–64 ops)
constexpr int kOpsForPeak = 16;

}  // namespace orion::runtime::anesim
