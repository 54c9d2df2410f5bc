// orion bench train: milliseconds per training step (zero_grad, forward, backward, AdamW) on
// random weights and random tokens — no files needed. Each phase also in CPU time of all threads
// (with OMP_WAIT_POLICY=passive: the work done, which a busy machine does not inflate as it does
// wall time). Registered under `orion bench` by
// add_all_commands, after add_bench_command. --backend anesim|ane runs the blocks as ANE programs
// (train/ane/ane_blocks.h) and reports the step's phases (ANE evaluation, surface copies, CPU dW,
// AdamW, weight update, compile) and, on anesim, the timing model's predicted ANE time per step.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "runtime/cpu/bf16_weight_packs.h"
#include "base/error.h"
#include "base/memory_usage.h"
#include "base/timer.h"
#include "data/rng.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_kernels.h"
#include "tools/command.h"
#include "tools/options.h"
#include "train/ane/ane_blocks.h"
#include "train/loop/trainer.h"

namespace orion::tools {
namespace {

struct BenchTrainArgs {
  std::string config = "stories260k";
  int batch = 4, seq = 64, steps = 5, warmup = 1;
  bool json = false, no_gemm_peak = false;
  ThreadOptions threads;
  std::string backend = "cpu";
  std::string checkpoint_activations = "none";
  std::string precision = "fp32";  // cpu: the training products' operands (train_kernels.h)
  train::AneTrainOptions ane;
};

// The step's compute bound (CPU, fp32 products): its FLOPs at the best fp32 GEMM rate this machine
// reaches in the same run on a step-shaped product [B·T, C]·[H, C]ᵀ — the training step's own
// kernel (matmul_forward_train), the prompt kernel or oneDNN (cpu::measure_gemm_peak; oneDNN picks
// its instruction set from DNNL_MAX_CPU_ISA, not ORION_ISA). FLOPs: 6 per matrix weight per token
// (forward, dX, dW) and causal attention's q·kᵀ and att·v, 2·T²·C per sequence and layer forward,
// twice that backward. AdamW, norms and the elementwise work are outside it, so a step cannot
// reach 100%.
struct ComputeBound {
  double step_gflop = 0, gemm_gflops = 0, bound_ms = 0;
};
ComputeBound compute_bound(const ModelConfig& c, int B, int T) {
  ComputeBound cb;
  const int M = B * T, K = c.dim, N = c.hidden_dim;
  cb.step_gflop = (6.0 * double(c.matmul_params()) * M + 6.0 * B * double(T) * T * c.dim * c.n_layers) / 1e9;
  std::vector<float> x(size_t(M) * K, 0.25f), W(size_t(N) * K, -0.125f), y(size_t(M) * N);
  double best_s = 1e30;
  for (int r = 0; r < 6; r++) {  // the first warms up
    Timer t;
    cpu::matmul_forward_train(y.data(), x.data(), W.data(), nullptr, M, K, N);
    if (r > 0) best_s = std::min(best_s, t.seconds());
  }
  const double train_flops = 2.0 * M * K * N / best_s;
  cb.gemm_gflops = std::max(train_flops, cpu::measure_gemm_peak(M, K, N, 5).best_flops) / 1e9;
  cb.bound_ms = 1000 * cb.step_gflop / cb.gemm_gflops;
  return cb;
}

// The ANE path's figures per timed step (phases reset after the warmup, whose first step compiles).
struct AneFigures {
  train::AnePhaseTimes ph;
  double first_compile_s = 0;
  std::string strategy, probe, budget;
  int programs = 0, Sa = 0, Sf = 0;
  bool overlap_dw = false;
};

void run_bench_train(const BenchTrainArgs& a) {
  a.threads.apply();
  ModelConfig c = train::resolve_model_config(a.config);
  if (a.seq > c.seq_len)
    throw_usage_error(fmt::format("--seq {} exceeds the model's context of {}", a.seq, c.seq_len), "--seq");
  train::Params p(c);
  train::init_params(p, 1);
  train::Grads g(c);
  train::TrainOptions to;
  to.backend = a.backend, to.checkpoint_activations = a.checkpoint_activations, to.precision = a.precision;
  to.validate();
  const cpu::ScopedGemmPrecision precision(to.gemm_precision());
  const cpu::ScopedBf16WeightPacks weight_packs;  // as the training loop keeps them
  train::TrainModel model(p, &g, a.batch, a.seq, to.activation_checkpointing());
  train::AneBlocks* ane = nullptr;
  if (a.backend != "cpu") {
    train::AneTrainOptions o = a.ane;
    o.driver = a.backend, o.quiet = true;
    auto blocks = train::make_ane_blocks(p, &g, a.batch, a.seq, o);
    ane = blocks.get();
    model.set_blocks(std::move(blocks));
  }
  AneFigures af;
  train::AdamW opt(p, {.weight_decay = 0.1f, .clip_norm = 1.0f});
  data::Rng rng(2);
  std::vector<int> tokens(size_t(a.batch) * a.seq), targets(tokens.size());
  for (int& x : tokens) x = int(rng.below(uint64_t(c.vocab_size)));
  for (int& x : targets) x = int(rng.below(uint64_t(c.vocab_size)));
  if (!a.json)
    std::fprintf(stderr, "… %s, batch %d×%d, %d threads, blocks on %s: %d warmup + %d timed steps\n", c.describe().c_str(),
                 a.batch, a.seq, cpu::num_threads(), a.backend.c_str(), a.warmup, a.steps);
  double fwd = 0, bwd = 0, upd = 0, wupd = 0, best = 1e30, total = 0;
  std::vector<double> step_s;  // each timed step, for the median (robust to a busy neighbour's bursts)
  double cpu_fwd = 0, cpu_bwd = 0, cpu_upd = 0;  // CPU seconds of all threads (passive waits cost none)
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    Timer t0;
    const double c0 = process_cpu_seconds();
    model.zero_grad();
    model.forward(tokens.data(), targets.data());
    const double t1 = t0.seconds(), c1 = process_cpu_seconds();
    model.backward();
    const double t2 = t0.seconds(), c2 = process_cpu_seconds();
    opt.step(p, g, 1e-4f);
    const double t3 = t0.seconds(), c3 = process_cpu_seconds();
    model.weights_updated();
    const double t4 = t0.seconds();
    if (ane && s == 0) af.first_compile_s = ane->phases().compile_s;
    if (ane && s + 1 == a.warmup) ane->reset_phases();
    if (s < a.warmup) continue;
    fwd += t1, bwd += t2 - t1, upd += t3 - t2, wupd += t4 - t3, total += t4;
    cpu_fwd += c1 - c0, cpu_bwd += c2 - c1, cpu_upd += c3 - c2;
    best = std::min(best, t4);
    step_s.push_back(t4);
  }
  std::sort(step_s.begin(), step_s.end());
  const size_t h = step_s.size() / 2;
  const double median = step_s.empty() ? 0 : step_s.size() % 2 ? step_s[h] : (step_s[h - 1] + step_s[h]) / 2;
  if (ane) {
    af.ph = ane->phases();
    af.strategy = ane->updates().strategy, af.probe = ane->updates().probe, af.budget = ane->budget().str();
    af.programs = ane->programs(), af.Sa = ane->attention_bucket(), af.Sf = ane->ffn_bucket();
    af.overlap_dw = ane->overlapping_dw();
  }
  const double n = a.steps, ms = 1000 * total / n, tok_s = double(a.batch) * a.seq / (total / n);
  // The fp32 step against its compute bound (bf16/fp16 products run faster than the fp32 peak).
  ComputeBound cb;
  if (!ane && a.precision == "fp32" && !a.no_gemm_peak) {
    if (!a.json) std::fprintf(stderr, "… measuring the fp32 GEMM peak (a step-shaped product, each GEMM path)\n");
    cb = compute_bound(c, a.batch, a.seq);
  }
  const double compute_efficiency = cb.bound_ms > 0 ? cb.bound_ms / (1000 * median) : 0;
  if (a.json) {
    std::printf(
        "{\"config\":\"%s\",\"params\":%zu,\"batch\":%d,\"seq\":%d,\"threads\":%d,\"steps\":%d,\"ms_per_step\":%.3f,"
        "\"median_ms\":%.3f,\"best_ms\":%.3f,\"tok_per_s\":%.1f,\"forward_ms\":%.3f,\"backward_ms\":%.3f,\"adamw_ms\":%.3f,"
        "\"cpu_forward_ms\":%.3f,\"cpu_backward_ms\":%.3f,\"cpu_adamw_ms\":%.3f,\"peak_rss_bytes\":%llu,"
        "\"checkpoint_activations\":\"%s\",\"precision\":\"%s\",\"weight_update_ms\":%.3f,\"weight_pack_bytes\":%zu,"
        "\"step_gflop\":%.9g,\"gemm_peak_gflops\":%.9g,\"compute_bound_ms\":%.9g,\"compute_efficiency\":%.9g}\n",
        a.config.c_str(), c.num_params(), a.batch, a.seq, cpu::num_threads(), a.steps, ms, median * 1000, best * 1000, tok_s,
        1000 * fwd / n, 1000 * bwd / n, 1000 * upd / n, 1000 * cpu_fwd / n, 1000 * cpu_bwd / n, 1000 * cpu_upd / n,
        static_cast<unsigned long long>(peak_resident_bytes()), a.checkpoint_activations.c_str(), a.precision.c_str(),
        1000 * wupd / n, cpu::weight_pack_bytes(), cb.step_gflop, cb.gemm_gflops, cb.bound_ms, compute_efficiency);
  } else {
    std::printf(
        "train step %s (B=%d, T=%d, %d threads, activation checkpointing %s, %s): %.1f ms/step (median %.1f, best %.1f), "
        "%.0f tok/s\n",
        a.config.c_str(), a.batch, a.seq, cpu::num_threads(), a.checkpoint_activations.c_str(), a.precision.c_str(), ms,
        median * 1000, best * 1000, tok_s);
    std::printf("  forward %.1f ms | backward %.1f ms | AdamW %.1f ms%s\n", 1000 * fwd / n, 1000 * bwd / n, 1000 * upd / n,
                ane                           ? fmt::format(" | weight update {:.1f} ms", 1000 * wupd / n).c_str()
                : cpu::weight_pack_bytes() > 0 ? fmt::format(" (it repacks the {:.0f} MB of bf16 weight packs) | refresh {:.1f} ms",
                                                             cpu::weight_pack_bytes() / 1e6, 1000 * wupd / n)
                                                     .c_str()
                                               : "");
    std::printf("  CPU time of all threads: forward %.1f ms | backward %.1f ms | AdamW %.1f ms | step %.1f ms\n",
                1000 * cpu_fwd / n, 1000 * cpu_bwd / n, 1000 * cpu_upd / n, 1000 * (cpu_fwd + cpu_bwd + cpu_upd) / n);
    std::printf("  peak resident memory: %.0f MB\n", peak_resident_bytes() / 1e6);
    if (cb.bound_ms > 0)
      std::printf(
          "  compute: %.1f GFLOP a step at the fp32 GEMM peak of %.0f GFLOP/s → bound %.1f ms; the median step reaches "
          "%.0f%% of it\n",
          cb.step_gflop, cb.gemm_gflops, cb.bound_ms, 100 * compute_efficiency);
  }
  if (!ane) return;
  const train::AnePhaseTimes& ph = af.ph;
  auto per_step = [&](double s) { return 1000 * s / n; };
  if (a.json) {
    std::printf(
        "{\"backend\":\"%s\",\"ane_eval_ms\":%.3f,\"surface_copy_ms\":%.3f,\"cpu_dw_ms\":%.3f,\"dw_wait_ms\":%.3f,\"cpu_other_ms\":%.3f,"
        "\"adamw_ms\":%.3f,\"weight_update_ms\":%.3f,\"compile_ms\":%.3f,\"first_compile_s\":%.3f,"
        "\"predicted_ane_ms_per_step\":%.3f,\"predicted_compute_ms\":%.3f,\"predicted_copy_ms\":%.3f,\"predicted_weight_stream_ms\":%.3f,"
        "\"evaluations_per_step\":%.1f,\"programs\":%d,\"strategy\":\"%s\"}\n",
        a.backend.c_str(), per_step(ph.ane_eval_s), per_step(ph.surface_copy_s), per_step(ph.cpu_dw_s),
        per_step(ph.dw_wait_s), per_step(ph.cpu_other_s), 1000 * upd / n, per_step(ph.weight_update_s),
        per_step(ph.compile_s), af.first_compile_s, ph.predicted_ane_ms / n, ph.predicted_compute_ms / n,
        ph.predicted_copy_ms / n, ph.predicted_weight_stream_ms / n, double(ph.evaluations) / n, af.programs,
        af.strategy.c_str());
    return;
  }
  std::printf(
      "  %s phases per step (host): ANE evaluation %.1f ms | surface copies %.1f ms | CPU dW %.1f ms (%s) | CPU other %.1f ms |\n"
      "    AdamW %.1f ms | weight update %.1f ms (%s) | compile %.1f ms; first step's compile %.2f s\n",
      a.backend.c_str(), per_step(ph.ane_eval_s), per_step(ph.surface_copy_s), per_step(ph.cpu_dw_s),
      af.overlap_dw ? fmt::format("overlapped with the ANE; waited for {:.1f} ms", per_step(ph.dw_wait_s)).c_str()
                    : "not overlapped",
      per_step(ph.cpu_other_s), 1000 * upd / n, per_step(ph.weight_update_s), af.strategy.c_str(), per_step(ph.compile_s),
      af.first_compile_s);
  std::printf(
      "  predicted ANE time per step (%s timing model, chip %s): %.1f ms over %.0f evaluations = dispatch %.1f + compute %.1f\n"
      "    + surface copies %.1f ms (of which streaming the weights as inputs %.1f ms)\n",
      a.backend.c_str(), a.ane.chip.c_str(), ph.predicted_ane_ms / n, double(ph.evaluations) / n,
      ph.predicted_dispatch_ms / n, ph.predicted_compute_ms / n, ph.predicted_copy_ms / n,
      ph.predicted_weight_stream_ms / n);
  std::printf("  %d programs, buckets S=%d (attention) / %d (feed-forward), %s; probe: %s\n", af.programs, af.Sa, af.Sf,
              af.budget.c_str(), af.probe.empty() ? "none" : af.probe.c_str());
}

}  // namespace

void add_bench_train_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");
  auto a = std::make_shared<BenchTrainArgs>();
  CLI::App* cmd = bench->add_subcommand(
      "train",
      "ms per training step (forward, backward, AdamW) and tok/s on random weights and tokens; with --backend anesim\n"
      "the ANE path's phases and the predicted ANE time per step\n"
      "Examples: orion bench train --config gpt2-124m --batch 4 --seq 64 --threads 2\n"
      "          orion bench train --backend anesim --config stories110m --batch 1 --seq 256 --steps 1");
  cmd->add_option("--config", a->config, "a preset or a JSON file of dimensions")->capture_default_str();
  cmd->add_option("--batch,-b", a->batch, "sequences per step (B)")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--seq", a->seq, "tokens per sequence (T)")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--steps", a->steps, "timed steps")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", a->warmup, "untimed steps first")->capture_default_str()->check(CLI::Range(0, 1000));
  cmd->add_flag("--json", a->json, "print the figures as one JSON object (two with --backend anesim|ane)");
  cmd->add_flag("--no-gemm-peak", a->no_gemm_peak,
                "skip the fp32 GEMM-peak measurement behind the compute bound (CPU, fp32)");
  cmd->add_option("--backend", a->backend, "cpu, or anesim / ane: the blocks as ANE programs")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "anesim", "ane"}));
  cmd->add_option("--checkpoint-activations", a->checkpoint_activations,
                  "gradient checkpointing: none, blocks or every-N (CPU; compare the peak memory)")
      ->capture_default_str();
  cmd->add_option("--precision", a->precision,
                  "cpu: the training products' matrices in fp32, bf16 (AVX512-BF16 where the CPU has it) or fp16")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  add_ane_train_options(cmd, a->ane);
  a->threads.add(cmd);
  cmd->callback([a] { run_bench_train(*a); });
}

}  // namespace orion::tools
