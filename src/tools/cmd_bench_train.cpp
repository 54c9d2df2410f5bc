// orion bench train: milliseconds per CPU training step (zero_grad, forward, backward, AdamW) on
// random weights and random tokens — no files needed. Registered under `orion bench` by
// add_all_commands, after add_bench_command.
#include <cstdio>

#include "base/error.h"
#include "base/timer.h"
#include "runtime/cpu/kernels.h"
#include "tools/command.h"
#include "tools/options.h"
#include "train/data/rng.h"
#include "train/trainer.h"

namespace orion::tools {
namespace {

struct BenchTrainArgs {
  std::string config = "stories260k";
  int batch = 4, seq = 64, steps = 5, warmup = 1;
  bool json = false;
  ThreadOptions threads;
};

void run_bench_train(const BenchTrainArgs& a) {
  a.threads.apply();
  ModelConfig c = train::resolve_model_config(a.config);
  if (a.seq > c.seq_len)
    throw_usage_error(fmt::format("--seq {} exceeds the model's context of {}", a.seq, c.seq_len), "--seq");
  train::Params p(c);
  train::init_params(p, 1);
  train::Grads g(c);
  train::TrainModel model(p, &g, a.batch, a.seq);
  train::AdamW opt(p, {.weight_decay = 0.1f, .clip_norm = 1.0f});
  data::Rng rng(2);
  std::vector<int> tokens(size_t(a.batch) * a.seq), targets(tokens.size());
  for (int& x : tokens) x = int(rng.below(uint64_t(c.vocab_size)));
  for (int& x : targets) x = int(rng.below(uint64_t(c.vocab_size)));
  if (!a.json)
    std::fprintf(stderr, "… %s, batch %d×%d, %d threads: %d warmup + %d timed steps\n", c.describe().c_str(), a.batch, a.seq,
                 cpu::num_threads(), a.warmup, a.steps);
  double fwd = 0, bwd = 0, upd = 0, best = 1e30, total = 0;
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    Timer t0;
    model.zero_grad();
    model.forward(tokens.data(), targets.data());
    const double t1 = t0.seconds();
    model.backward();
    const double t2 = t0.seconds();
    opt.step(p, g, 1e-4f);
    const double t3 = t0.seconds();
    if (s < a.warmup) continue;
    fwd += t1, bwd += t2 - t1, upd += t3 - t2, total += t3;
    best = std::min(best, t3);
  }
  const double n = a.steps, ms = 1000 * total / n, tok_s = double(a.batch) * a.seq / (total / n);
  if (a.json) {
    std::printf("{\"config\":\"%s\",\"params\":%zu,\"batch\":%d,\"seq\":%d,\"threads\":%d,\"steps\":%d,\"ms_per_step\":%.3f,"
                "\"best_ms\":%.3f,\"tok_per_s\":%.1f,\"forward_ms\":%.3f,\"backward_ms\":%.3f,\"adamw_ms\":%.3f}\n",
                a.config.c_str(), c.num_params(), a.batch, a.seq, cpu::num_threads(), a.steps, ms, best * 1000, tok_s,
                1000 * fwd / n, 1000 * bwd / n, 1000 * upd / n);
  } else {
    std::printf("train step %s (B=%d, T=%d, %d threads): %.1f ms/step (best %.1f), %.0f tok/s\n", a.config.c_str(), a.batch,
                a.seq, cpu::num_threads(), ms, best * 1000, tok_s);
    std::printf("  forward %.1f ms | backward %.1f ms | AdamW %.1f ms\n", 1000 * fwd / n, 1000 * bwd / n, 1000 * upd / n);
  }
}

}  // namespace

void add_bench_train_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");
  auto a = std::make_shared<BenchTrainArgs>();
  CLI::App* cmd = bench->add_subcommand(
      "train", "ms per CPU training step (forward, backward, AdamW) and tok/s on random weights and tokens\n"
               "Example: orion bench train --config gpt2-124m --batch 4 --seq 64 --threads 2");
  cmd->add_option("--config", a->config, "a preset or a JSON file of dimensions")->capture_default_str();
  cmd->add_option("--batch,-b", a->batch, "sequences per step (B)")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--seq", a->seq, "tokens per sequence (T)")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--steps", a->steps, "timed steps")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", a->warmup, "untimed steps first")->capture_default_str()->check(CLI::Range(0, 1000));
  cmd->add_flag("--json", a->json, "print the figures as one JSON object");
  a->threads.add(cmd);
  cmd->callback([a] { run_bench_train(*a); });
}

}  // namespace orion::tools
