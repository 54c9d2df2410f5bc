#include "runtime/anesim/anesim_workload.h"

#include <algorithm>

#include "base/error.h"

namespace orion::runtime::anesim {

ProgramCost kernel_cost(const KernelSpec& k, const compiler::ChipProfile& chip) {
  ProgramCost c;
  c.ops = k.ops;
  const double S = double(k.seq);
  for (const auto& [cin, cout] : k.convs) {
    c.flops += 2.0 * double(cin) * double(cout) * S;
    c.constant_bytes += 2 * cin * cout;
  }
  // Scores and the weighted sum are each 2·S·T·D multiply-adds per pass.
  c.flops += 4.0 * S * double(k.attention_keys) * double(k.attention_dim) * k.attention_passes;
  const int64_t in = 2 * k.in_channels * k.seq, out = 2 * k.out_channels * k.seq;
  c.working_set_bytes = c.constant_bytes + in + out;
  c.surface_bytes = std::max(in, chip.min_buffer_bytes) + std::max(out, chip.min_buffer_bytes);
  return c;
}

Measure parse_measure(const std::string& s) {
  if (s == "ane_ms") return Measure::AneMs;
  if (s == "total_ms") return Measure::TotalMs;
  if (s == "tok_s") return Measure::TokPerS;
  if (s == "compile_ms") return Measure::CompileMs;
  if (s == "reload_ms") return Measure::ReloadMs;
  throw_usage_error("unknown measure '" + s + "'", "measure", "one of ane_ms, total_ms, tok_s, compile_ms, reload_ms");
}

double predict_workload(const std::vector<KernelSpec>& kernels, Measure m, double tokens,
                        const compiler::ChipProfile& chip) {
  const ChipTiming timing = chip_timing(chip);
  double ane_ms = 0, copy_ms = 0, weights = 0;
  int programs = 0;
  for (const KernelSpec& k : kernels) {
    const ProgramCost c = kernel_cost(k, chip);
    const TimingBreakdown t = predict_evaluation(c, timing, k.resident);
    ane_ms += k.count * (t.total_ms - t.copy_ms);
    copy_ms += k.count * t.copy_ms;
    weights += double(k.count) * double(c.constant_bytes);
    if (c.constant_bytes > 0) programs += k.count;
  }
  switch (m) {
    case Measure::AneMs: return ane_ms;
    case Measure::TotalMs: return ane_ms + copy_ms;
    case Measure::TokPerS: return tokens / ((ane_ms + copy_ms) / 1e3);
    case Measure::CompileMs: return compile_and_load_ms(programs, weights, timing);
    case Measure::ReloadMs: return reload_ms(weights, timing);
  }
  return 0;
}

}  // namespace orion::runtime::anesim
