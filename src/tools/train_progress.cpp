#include "tools/train_progress.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "base/memory_usage.h"
#include "data/progress.h"
#include "train/loop/train_options.h"

namespace orion::tools {
namespace {

using train::ProgressEvent;
using train::TrainOptions;

std::string format_rate(double tok_s) {
  return tok_s >= 1e6   ? fmt::format("{:.2f}M", tok_s / 1e6)
         : tok_s >= 1e3 ? fmt::format("{:.1f}k", tok_s / 1e3)
                        : fmt::format("{:.0f}", tok_s);
}

// Every rank's tokens per step, and the rate of the steps this process ran.
double tokens_per_step(const TrainOptions& o, int world) { return double(o.batch) * o.seq * o.accum * world; }
double rate(const ProgressEvent& e) {
  return e.run_seconds > 0 ? tokens_per_step(*e.options, e.world) * double(e.run_steps) / e.run_seconds : 0;
}

void print_start(ProgressStyle style, const ProgressEvent& e) {
  const TrainOptions& o = *e.options;
  const int global_batch = o.batch * e.world;
  const std::string parallel =
      fmt::format("data parallel over {}: {} rows per rank, global batch {} rows", e.comm, o.batch, global_batch);
  if (style == ProgressStyle::Lora) {
    const std::string shape =
        o.accum == 1 ? fmt::format("{}×{}", o.batch, o.seq) : fmt::format("{}×{}×{}", o.batch, o.seq, o.accum);
    std::fprintf(stderr, "lora: %s; %llu training tokens, %s tokens/step, steps %lld→%lld, lr %.1e %s\n", e.text.c_str(),
                 (unsigned long long)e.train_tokens, shape.c_str(), (long long)e.first_step, (long long)o.steps, o.lr,
                 o.schedule.c_str());
    if (e.world > 1) std::fprintf(stderr, "lora: %s\n", parallel.c_str());
    return;
  }
  std::fprintf(stderr, "train: %s\n", e.text.c_str());
  if (e.world > 1) std::fprintf(stderr, "train: %s\n", parallel.c_str());
  const std::string val = e.val_tokens >= 0 ? fmt::format("{} validation tokens", e.val_tokens) : "no validation split";
  std::fprintf(
      stderr,
      "train: %llu training tokens (%llu batches/epoch), %s; %d×%d×%d = %d tokens/step; steps %lld→%lld; lr %.2e %s, "
      "warmup %d, clip %g\n",
      (unsigned long long)e.train_tokens, (unsigned long long)e.batches_per_epoch, val.c_str(), global_batch, o.seq, o.accum,
      global_batch * o.seq * o.accum, (long long)e.first_step, (long long)o.steps, o.lr, o.schedule.c_str(),
      o.warmup_steps(), o.clip);
}

void print_step(ProgressStyle style, const ProgressEvent& e) {
  const TrainOptions& o = *e.options;
  const train::StepStats& s = e.stats;
  const char* prefix = style == ProgressStyle::Lora ? "lora: " : "train: ";
  if (s.skipped)
    std::fprintf(stderr, "%sstep %lld skipped: loss %g, gradient norm %g (%lld skipped so far)\n", prefix, (long long)e.done,
                 s.loss, s.grad_norm, (long long)e.skipped_total);
  if (style == ProgressStyle::Lora) {  // about 20 lines a run
    const int every = o.log_every > 0 ? o.log_every : int(std::max<int64_t>(1, o.steps / 20));
    if (!(e.done % every == 0 || e.val_loss >= 0 || e.run_steps == 1)) return;
    const std::string ane = e.compiles >= 0 ? fmt::format(" | {} compiles | {}", e.compiles, e.phases()) : "";
    std::fprintf(stderr, "lora: step %lld/%lld | loss %.4f%s | lr %.2e | gnorm %.3f | %.0f tok/s%s\n", (long long)e.done,
                 (long long)o.steps, s.loss, e.val_loss >= 0 ? fmt::format(" | val {:.4f}", e.val_loss).c_str() : "", s.lr,
                 s.grad_norm, rate(e), ane.c_str());
    return;
  }
  // About 40 lines a run, the first and the last steps, and every evaluation.
  const int every = o.log_every > 0 ? o.log_every : int(std::max<int64_t>(1, o.steps / 40));
  if (!(e.done == 1 || e.done == o.steps || e.done % every == 0 || e.val_loss >= 0 || e.run_steps == 1)) return;
  const double ms = 1000.0 * e.run_seconds / double(e.run_steps);
  const double eta = (ms / 1000.0) * double(o.steps - e.done);
  std::string line =
      fmt::format("step {:>{}}/{} | loss {:.4f}", e.done, int(std::to_string(o.steps).size()), o.steps, s.loss);
  if (e.val_loss >= 0) line += fmt::format(" | val {:.4f}", e.val_loss);
  line += fmt::format(" | lr {:.2e} | gnorm {:.2f} | {} tok/s | {:.0f} ms/step | ETA {}", s.lr, s.grad_norm,
                      format_rate(rate(e)), ms, data::format_duration(eta));
  std::fprintf(stderr, "%s\n", line.c_str());
  if (std::string phases = e.phases ? e.phases() : ""; !phases.empty()) std::fprintf(stderr, "  %s\n", phases.c_str());
}

void print_done(ProgressStyle style, const ProgressEvent& e) {
  const train::TrainResult& r = *e.result;
  if (style == ProgressStyle::Lora) {
    std::fprintf(stderr, "lora: %lld steps in %.1f s (%.0f tok/s), %lld skipped, peak memory %.0f MB; %s %s\n",
                 (long long)e.run_steps, r.seconds, r.tokens_per_second, (long long)r.skipped_steps,
                 peak_resident_bytes() / 1e6, r.model.empty() ? "checkpoint" : "adapter in",
                 (r.model.empty() ? r.checkpoint : r.model).c_str());
    if (r.world > 1)
      std::fprintf(stderr, "lora: all-reduce %.2f MB/step, %.1f%% of step time\n", double(r.bytes_reduced_per_step) / 1e6,
                   100.0 * r.comm_share);
    return;
  }
  std::fprintf(stderr, "train: %lld steps in %.1f s (%s tok/s), %lld skipped, peak memory %.0f MB; checkpoint %s%s%s\n",
               (long long)e.run_steps, r.seconds, format_rate(r.tokens_per_second).c_str(), (long long)r.skipped_steps,
               peak_resident_bytes() / 1e6, r.checkpoint.c_str(), r.model.empty() ? "" : ", model ", r.model.c_str());
  if (r.world > 1)
    std::fprintf(stderr, "train: %d ranks: %.2f MB all-reduced per step, %.1f%% of the step time in all-reduce\n", r.world,
                 double(r.bytes_reduced_per_step) / 1e6, 100.0 * r.comm_share);
}

}  // namespace

train::ProgressCallback progress_printer(ProgressStyle style) {
  return [style](const ProgressEvent& e) {
    const char* name = style == ProgressStyle::Lora ? "lora" : "train";
    switch (e.kind) {
      case ProgressEvent::Kind::Note: std::fprintf(stderr, "%s\n", e.text.c_str()); break;
      case ProgressEvent::Kind::Start: print_start(style, e); break;
      case ProgressEvent::Kind::Step: print_step(style, e); break;
      case ProgressEvent::Kind::Sample:
        if (e.final) std::fprintf(stderr, "%s: sample: %s\n", name, e.text.c_str());
        else std::fprintf(stderr, "  sample: %s\n", e.text.c_str());
        break;
      case ProgressEvent::Kind::Interrupted: std::fprintf(stderr, "%s: interrupted; writing a checkpoint\n", name); break;
      case ProgressEvent::Kind::Done: print_done(style, e); break;
    }
  };
}

}  // namespace orion::tools
