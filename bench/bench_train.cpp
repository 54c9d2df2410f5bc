// One CPU training step (zero_grad, forward, backward, AdamW) per iteration, for the configs whose
// step time is tracked: GPT-2 124M at batch 4 × 64 tokens (llm.c's train_gpt2.c: ~6.3 s/step on 2 threads)
// and the Stories models. Run: bench_train --benchmark_filter=gpt2 (the 124M case needs ~2.5 GB).
#include <benchmark/benchmark.h>

#include <random>

#include "train/model/trainer_api.h"

using namespace orion;
using namespace orion::train;

namespace {
void train_step(benchmark::State& state, const char* preset, int B, int T) {
  ModelConfig c = config_preset(preset);
  ParamBuffer p = ParamBuffer::from_weights(random_weights(c, 1));
  ParamBuffer g(c);
  TrainModel model(p, &g, B, T);
  AdamW opt(p);
  std::mt19937_64 rng(2);
  std::vector<int> tokens(size_t(B) * T), targets(size_t(B) * T);
  for (int& x : tokens) x = int(rng() % uint64_t(c.vocab_size));
  for (int& x : targets) x = int(rng() % uint64_t(c.vocab_size));
  for (auto _ : state) {
    model.zero_grad();
    benchmark::DoNotOptimize(model.forward(tokens.data(), targets.data()));
    model.backward();
    opt.step(p, g, 1e-4f);
  }
  state.counters["tok/s"] = benchmark::Counter(double(B) * T, benchmark::Counter::kIsIterationInvariantRate);
}
}  // namespace

BENCHMARK_CAPTURE(train_step, stories260k_b8_t256, "stories260k", 8, 256)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(train_step, stories15m_b4_t256, "stories15m", 4, 256)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(train_step, gpt2_124m_b4_t64, "gpt2-124m", 4, 64)->Unit(benchmark::kMillisecond)->MinTime(5);
BENCHMARK_CAPTURE(train_step, stories110m_b4_t64, "stories110m", 4, 64)->Unit(benchmark::kMillisecond)->MinTime(5);
