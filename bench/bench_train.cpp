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

// The three products of a linear layer in a training step, alone, at GPT-2 124M's shapes with
// B·T = 256 tokens: y = x·Wᵀ (0), dx = dy·W (1), dW += dyᵀ·x (2), dW = dyᵀ·x (3); in bf16 the
// weights [N, K] as the step keeps them (packed once, bf16_weight_packs.h), or in fp32.
// GFLOP/s counts 2·M·N·K per product.
//   bench_train --benchmark_filter=bf16_product     (or fp32_product)
#include "runtime/cpu/bf16_weight_packs.h"
#include "runtime/cpu/train_kernels.h"
namespace {
void product(benchmark::State& state, cpu::GemmPrecision precision) {
  const int which = int(state.range(0)), N = int(state.range(1)), K = int(state.range(2)), M = 256;
  if (precision == cpu::GemmPrecision::BF16 && !cpu::bf16_dot_available())
    return state.SkipWithError("no AVX512-BF16 on this CPU");
  cpu::set_train_gemm_precision(precision);
  cpu::ScopedBf16WeightPacks packs;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  auto fill = [&](size_t n) { std::vector<float> v(n); for (float& x : v) x = nd(rng); return v; };
  std::vector<float> W = fill(size_t(N) * K), x = fill(size_t(M) * K), dy = fill(size_t(M) * N);
  std::vector<float> y(size_t(M) * N), dx(size_t(M) * K);
  // dW cycles through buffers totalling ≥ 256 MB: in a step each gradient is cold (500 MB of them)
  const size_t ring = std::max<size_t>(2, (size_t(256) << 20) / (size_t(N) * K * 4));
  std::vector<std::vector<float>> dWs(ring, std::vector<float>(size_t(N) * K));
  size_t it = 0;
  cpu::matmul_forward_train(y.data(), x.data(), W.data(), nullptr, M, K, N);  // notes W
  cpu::matmul_backward_input(dx.data(), dy.data(), W.data(), M, K, N);
  cpu::refresh_weight_packs(W.data(), W.size());
  for (auto _ : state) {
    if (which == 0) cpu::matmul_forward_train(y.data(), x.data(), W.data(), nullptr, M, K, N);
    if (which == 1) cpu::matmul_backward_input(dx.data(), dy.data(), W.data(), M, K, N);
    if (which == 2) cpu::matmul_backward_weight(dWs[it++ % ring].data(), dy.data(), x.data(), M, K, N);
    if (which == 3)  // as the step runs it: the gradient's first write (train/cpu/first_write_zero.h)
      cpu::matmul_backward_weight(dWs[it++ % ring].data(), dy.data(), x.data(), M, K, N, cpu::COut::OverwriteCold);
  }
  cpu::set_train_gemm_precision(cpu::GemmPrecision::F32);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * N * K * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void bf16_product(benchmark::State& state) { product(state, cpu::GemmPrecision::BF16); }
void fp32_product(benchmark::State& state) { product(state, cpu::GemmPrecision::F32); }
}  // namespace
#define ORION_PRODUCT_SHAPES(fn)                          \
  BENCHMARK(fn)                                           \
      ->ArgsProduct({{0, 1, 2, 3}, {2304}, {768}})        \
      ->ArgsProduct({{0, 1, 2, 3}, {3072}, {768}})        \
      ->ArgsProduct({{0, 1, 2, 3}, {768}, {3072}})        \
      ->ArgsProduct({{0, 1, 2, 3}, {50304}, {768}})       \
      ->UseRealTime()                                     \
      ->Unit(benchmark::kMillisecond)
ORION_PRODUCT_SHAPES(bf16_product);
ORION_PRODUCT_SHAPES(fp32_product);

// Causal attention of one GPT-2 124M layer in a training step (B 4, T 64, 12 heads of 64): its
// forward (0) and backward (1) alone. GFLOP/s counts the four (backward) or two (forward) products
// of T·(T+1)/2 query–key pairs per head, 2·HS flops each.
//   bench_train --benchmark_filter=attention
#include "train/cpu/layers.h"
namespace {
void attention(benchmark::State& state) {
  const int which = int(state.range(0)), B = 4, T = int(state.range(1)), NH = 12, HS = 64, C = NH * HS;
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  auto fill = [&](size_t n) { std::vector<float> v(n); for (float& x : v) x = nd(rng); return v; };
  const size_t n = size_t(B) * T * C;
  std::vector<float> q = fill(n), k = fill(n), v = fill(n), dout = fill(n), out(n), dq(n), dk(n), dv(n);
  std::vector<float> att(size_t(B) * NH * T * T);
  train::attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), B, T, NH, NH, HS);
  for (auto _ : state) {
    if (which == 0) train::attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), B, T, NH, NH, HS);
    else train::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), att.data(), q.data(), k.data(), v.data(), B, T, NH, NH, HS);
  }
  const double pairs = double(B) * NH * T * (T + 1) / 2;
  state.counters["GFLOP/s"] = benchmark::Counter((which ? 4 : 2) * pairs * 2 * HS * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
}  // namespace
BENCHMARK(attention)->ArgsProduct({{0, 1}, {64, 1024}})->UseRealTime()->Unit(benchmark::kMicrosecond);
