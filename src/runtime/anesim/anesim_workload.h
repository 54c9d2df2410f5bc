// Workloads described by their kernels' shapes, so that the timing model (anesim_timing.h) can
// predict a published figure — a decode step, a training step's ANE time, a compile of N programs
// — without building the programs. docs/ane-timing.md compares these predictions with every
// public figure we found (tests/testdata/ane/public_figures.json; checked by
// tests/runtime/test_anesim_public_figures.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/anesim/anesim_timing.h"

namespace orion::runtime::anesim {

// One ANE program of the workload, evaluated `count` times.
struct KernelSpec {
  std::string name;
  int count = 1;                                  // evaluations (or programs, for compile figures)
  int ops = 1;                                    // ops in the program (utilisation)
  int64_t seq = 1;                                // columns S of the [1, C, 1, S] activations
  std::vector<std::array<int64_t, 2>> convs;      // weight matrices [C_in, C_out], fp16 constants
  int64_t attention_dim = 0, attention_keys = 0;  // attention over `keys` positions, width `dim`
  int attention_passes = 0;                       // 1 forward; each backward pass adds one
  int64_t in_channels = 0, out_channels = 0;      // surface channels written and read
  bool resident = false;                          // evaluated back to back: weights stay in SRAM
};

// The per-evaluation cost of one kernel: flops of its convs and attention, fp16 constants,
// working set (constants + input and output activations) and surfaces (each at least the
// chip's minimum buffer, C7).
ProgramCost kernel_cost(const KernelSpec& k, const compiler::ChipProfile& chip);

// What a figure measures.
enum class Measure {
  AneMs,      // Σ evaluations' dispatch + max(compute, memory): what a timer around evaluate sees
  TotalMs,    // the same plus host ↔ surface copies
  TokPerS,    // `tokens` / TotalMs
  CompileMs,  // compile and load every kernel that holds weights (count = programs; a kernel
              // without weights is compiled once and kept, so recompiles do not touch it)
  ReloadMs,   // delta reload of every kernel's weights
};
Measure parse_measure(const std::string& s);  // "ane_ms", "total_ms", "tok_s", "compile_ms", "reload_ms"

double predict_workload(const std::vector<KernelSpec>& kernels, Measure m, double tokens, const compiler::ChipProfile& chip);

}  // namespace orion::runtime::anesim
