// Training through the ANE path on anesim (train/ane/ane_blocks.h): the same steps as the CPU
// trainer, with the blocks' forward and input gradients run as compiled programs in fp16, must
// give the CPU's losses within fp16 tolerance; weight updates must be verified — a stale delta
// reload (anesim's default, like M3–M5 hardware) detected and recovered from — and must respect
// the compile budget; weights as inputs must keep the compile count constant.
//
// How the comparison is made, so that it holds on every CPU (AVX-512, AVX2, portable kernels):
//   * Given the same weights, one step of the ANE path must match the CPU's within what fp16
//     rounding explains: the loss within 2u·max(1, loss) and every tensor's gradient within 40u
//     (u = 2⁻¹¹, fp16's unit roundoff; a gradient crosses some 40 fp16-stored values on its way
//     through two layers' backward programs, and worst-case errors add up).
//   * Over a run, per-step errors can only add up if the optimisation does not amplify them: the
//     trajectories are compared at a learning rate where the CPU's loss falls at every step (checked),
//     against the sum of the per-step bounds. At a higher rate the loss spikes (this run at 3e-3:
//     from 2.94 to 3.58 at step 8), and a spike turns any difference — even the last bit of an fp32
//     sum, which differs between instruction sets — into percent-sized differences later on: such a
//     comparison tests the machine's luck, not the ANE path.
//
// Models are tiny but wide enough that the attention buffers reach the 49,152-byte minimum (C7)
// at a short sequence: k, v [1, C, 1, S] need C·S ≥ 24,576, so C = 192 runs at S = 128.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "model/frontends/program_set.h"
#include "train/ane/ane_blocks.h"
#include "train/model/trainer_api.h"

using namespace orion;
using namespace orion::train;
using runtime::UpdateStrategy;

namespace {

constexpr int kB = 1, kT = 128;
constexpr double kFp16U = 1.0 / 2048;  // fp16's unit roundoff: relative error of one rounding
constexpr float kStableLr = 1e-3f;     // the loss falls at every step of these runs (checked)
constexpr float kSpikyLr = 3e-3f;      // the loss spikes at step 8 (Llama): for same-weights steps only

ModelConfig tiny(Arch arch, int layers = 2) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 192, c.hidden_dim = arch == Arch::GPT2 ? 384 : 256, c.n_layers = layers, c.n_heads = 6, c.n_kv_heads = 6;
  c.vocab_size = 128, c.padded_vocab = 128, c.seq_len = kT;
  c.validate("test");
  return c;
}

// A learnable batch: a repeating pattern with some noise, each target the next token.
struct Batch {
  std::vector<int> tokens, targets;
};
Batch make_batch(const ModelConfig& c) {
  std::mt19937_64 rng(11);
  std::vector<int> stream(size_t(kB) * kT + 1);
  for (size_t i = 0; i < stream.size(); i++)
    stream[i] = rng() % 5 == 0 ? int(rng() % uint64_t(c.vocab_size)) : int(i * 7 % 23);
  return {{stream.begin(), stream.end() - 1}, {stream.begin() + 1, stream.end()}};
}

struct TrainRun {
  std::vector<float> losses;
  std::vector<float> first_grads;   // after the first backward
  std::vector<float> final_params;  // after the last step
  WeightUpdateStats updates;
  std::vector<int> compiles;                   // driver compiles after each step
  std::vector<runtime::CacheStats> cache;      // the runner's program cache after each step
  std::vector<runtime::ProgramKey> cached;     // its programs after the last step
  std::vector<frontends::ProgramSpec> listed;  // training_programs at the runner's buckets
  int budget_used = 0, budget_limit = 0;
  AnePhaseTimes phases;
  bool overlapping = false;
};

// `steps` AdamW steps on one batch; backend nullptr: the CPU runner.
TrainRun run_training(const ModelConfig& c, int steps, const AneTrainOptions* ane) {
  Params p(c);
  init_params(p, 3);
  Grads g(c);
  TrainModel model(p, &g, kB, kT);
  AneBlocks* blocks = nullptr;
  if (ane) {
    auto b = make_ane_blocks(p, &g, kB, kT, *ane);
    blocks = b.get();
    EXPECT_EQ(blocks->programs(), 0) << "nothing is compiled before the first forward";
    model.set_blocks(std::move(b));
  }
  AdamW opt(p, {.weight_decay = 0.0f, .clip_norm = 1.0f});
  Batch batch = make_batch(c);
  TrainRun r;
  for (int s = 0; s < steps; s++) {
    model.zero_grad();
    r.losses.push_back(model.forward(batch.tokens.data(), batch.targets.data()));
    model.backward();
    if (s == 0) r.first_grads.assign(g.data(), g.data() + g.size());
    opt.step(p, g, kStableLr);
    model.weights_updated();
    if (blocks) r.compiles.push_back(blocks->driver().counters().compiles), r.cache.push_back(blocks->cache().stats());
  }
  r.final_params.assign(p.data(), p.data() + p.size());
  if (blocks) {
    r.updates = blocks->updates();
    r.budget_used = blocks->budget().used(), r.budget_limit = blocks->budget().limit();
    r.phases = blocks->phases();
    r.overlapping = blocks->overlapping_dw();
    r.cached = blocks->cache().keys();
    r.listed = frontends::training_programs(p.view(), {blocks->attention_bucket(), blocks->ffn_bucket()});
    EXPECT_EQ(blocks->sanitized(), 0u) << "no fp16 overflow expected in a tiny model";
  }
  return r;
}

AneTrainOptions quiet_options() {
  AneTrainOptions o;
  o.quiet = true;
  return o;
}

// ‖a − b‖ / max(‖b‖, floor): the floor keeps gradients that are zero in exact arithmetic (GPT-2's
// key bias: softmax ignores a constant added to a row of scores) from dividing noise by noise.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b, double floor = 1e-30) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); i++) d += double(a[i] - b[i]) * (a[i] - b[i]), n += double(b[i]) * b[i];
  return std::sqrt(d) / std::max(std::sqrt(n), floor);
}

// The first step's gradients of every tensor of `ane` against `cpu`, relative to the tensor's norm
// (floored at 1e-3 of the whole gradient's norm); the worst tensor's error and its name.
std::pair<double, std::string> worst_gradient_error(const ModelConfig& c, const float* ane, const float* cpu, size_t n) {
  const double floor = 1e-3 * std::sqrt(std::inner_product(cpu, cpu + n, cpu, 0.0));
  const Params layout(c);  // named: a range-for over a temporary's member would outlive the temporary
  std::pair<double, std::string> worst{0.0, ""};
  for (const ParamInfo& t : layout.tensors()) {
    const std::vector<float> a(ane + t.offset, ane + t.offset + t.numel), b(cpu + t.offset, cpu + t.offset + t.numel);
    const double d = rel_diff(a, b, floor);
    if (d > worst.first) worst = {d, t.name};
  }
  return worst;
}

// Losses side by side, within the sum of the per-step fp16 bounds, on a stable run (see the top).
void expect_same_losses(const TrainRun& cpu, const TrainRun& ane, const char* what) {
  std::printf("  %s  step: cpu / anesim (bound)\n", what);
  ASSERT_EQ(cpu.losses.size(), ane.losses.size());
  double bound = 0;
  for (size_t s = 0; s < cpu.losses.size(); s++) {
    bound += 2 * kFp16U * std::max(1.0f, cpu.losses[s]);  // this step's error, added to the earlier ones'
    std::printf("    %2zu: %.5f / %.5f  (%.4f)\n", s + 1, cpu.losses[s], ane.losses[s], bound);
    EXPECT_NEAR(ane.losses[s], cpu.losses[s], bound) << what << " step " << s + 1;
    if (s > 0)
      EXPECT_LT(cpu.losses[s], cpu.losses[s - 1]) << what << " step " << s + 1 << ": the comparison needs a stable run";
  }
}

// expect_same_losses, the first step's gradients tensor by tensor, and a run that learns.
void expect_same_training(const ModelConfig& c, const TrainRun& cpu, const TrainRun& ane, const char* what) {
  expect_same_losses(cpu, ane, what);
  const auto [err, name] = worst_gradient_error(c, ane.first_grads.data(), cpu.first_grads.data(), cpu.first_grads.size());
  EXPECT_LT(err, 40 * kFp16U) << what << ": first step's gradient of " << name;
  EXPECT_LT(cpu.losses.back(), cpu.losses.front() - 0.5f) << "the run must learn something to compare";
}

// The CPU trains for `steps` steps (at kSpikyLr: large and changing losses); before each of its
// steps, the ANE path computes the loss and gradients from the same weights. Nothing compounds,
// so every step must match within one step's fp16 error (see the top).
void expect_same_steps_given_the_same_weights(const ModelConfig& c, int steps, const char* what) {
  Params p(c), q(c);
  init_params(p, 3);
  Grads g(c), h(c);
  TrainModel cpu(p, &g, kB, kT), ane(q, &h, kB, kT);
  ane.set_blocks(make_ane_blocks(q, &h, kB, kT, quiet_options()));
  AdamW opt(p, {.weight_decay = 0.0f, .clip_norm = 1.0f});
  const Batch batch = make_batch(c);
  std::printf("  %s  step: cpu / anesim loss, worst tensor's gradient error\n", what);
  for (int s = 0; s < steps; s++) {
    std::copy(p.data(), p.data() + p.size(), q.data());
    ane.weights_updated();
    cpu.zero_grad(), ane.zero_grad();
    const float lc = cpu.forward(batch.tokens.data(), batch.targets.data());
    const float la = ane.forward(batch.tokens.data(), batch.targets.data());
    cpu.backward(), ane.backward();
    const auto [err, name] = worst_gradient_error(c, h.data(), g.data(), g.size());
    std::printf("    %2d: %.5f / %.5f  %.2e (%s)\n", s + 1, lc, la, err, name.c_str());
    EXPECT_NEAR(la, lc, 2 * kFp16U * std::max(1.0f, lc)) << what << " step " << s + 1;
    EXPECT_LT(err, 40 * kFp16U) << what << " step " << s + 1 << ": gradient of " << name;
    opt.step(p, g, kSpikyLr);
    cpu.weights_updated();
  }
}

}  // namespace

TEST(AnesimTrain, StoriesMatchesCpuFor20Steps) {
  const ModelConfig c = tiny(Arch::Llama);
  AneTrainOptions o = quiet_options();
  TrainRun cpu = run_training(c, 20, nullptr), ane = run_training(c, 20, &o);
  expect_same_training(c, cpu, ane, "stories (llama C=192 L=2)");
  EXPECT_NE(ane.updates.probe.find("stale"), std::string::npos) << ane.updates.probe;
  EXPECT_EQ(ane.updates.strategy, "weights-as-inputs");
  EXPECT_GT(ane.phases.predicted_ane_ms, 0.0);
  EXPECT_EQ(ane.phases.steps, 20);
}

TEST(AnesimTrain, Gpt2MatchesCpuFor20Steps) {
  const ModelConfig c = tiny(Arch::GPT2);
  AneTrainOptions o = quiet_options();
  TrainRun cpu = run_training(c, 20, nullptr), ane = run_training(c, 20, &o);
  expect_same_training(c, cpu, ane, "gpt2 (C=192 L=2)");
}

// Every step of a run whose loss spikes and falls (the CPU's trajectory), with the ANE path given
// the same weights. Before gradient scaling at the programs' boundary (ane_blocks_impl.h,
// gradient_scale), the attention's q/k weight gradients were off by 5–26% here as the loss fell:
// their products inside the backward programs had fallen into fp16's subnormal range.
TEST(AnesimTrain, StoriesStepsMatchCpuGivenTheSameWeights) {
  expect_same_steps_given_the_same_weights(tiny(Arch::Llama), 20, "stories (llama C=192 L=2)");
}
TEST(AnesimTrain, Gpt2StepsMatchCpuGivenTheSameWeights) {
  expect_same_steps_given_the_same_weights(tiny(Arch::GPT2), 20, "gpt2 (C=192 L=2)");
}

// Delta reload asked for explicitly on anesim's default (hardware-like) driver: every program's
// first update is verified, found stale, and falls back to weights as inputs — and training still
// follows the CPU's.
TEST(AnesimTrain, StaleDeltaReloadIsDetectedAndRecovered) {
  const ModelConfig c = tiny(Arch::Llama);
  AneTrainOptions o = quiet_options();
  o.weight_update = UpdateStrategy::DeltaReload;
  TrainRun cpu = run_training(c, 4, nullptr), ane = run_training(c, 4, &o);
  const int weighted = 5 * c.n_layers;  // fwd_attn, fwd_ffn, ffn_bwd, sdpa_bwd1, qkv_bwd per layer
  EXPECT_EQ(ane.updates.stale_detected, weighted) << "each program's delta reload was stale";
  EXPECT_EQ(ane.updates.fallbacks, weighted);
  EXPECT_EQ(ane.updates.strategy, "weights-as-inputs") << "recovered by streaming the weights";
  EXPECT_GE(ane.updates.verified, weighted);
  EXPECT_EQ(ane.updates.written_directly, 3 * weighted) << "after the fallback: the parameters straight into the surfaces";
  expect_same_losses(cpu, ane, "stories");
  // After the fallback's one compile per program, no more compiles.
  EXPECT_EQ(ane.compiles[1], ane.compiles.back());
}

// Unverified weights-as-inputs updates write the parameters straight into the programs' weight
// surfaces (train/ane/weight_recipes.h): the run is bit for bit the one that rebuilds every
// program's graph for every update.
TEST(AnesimTrain, DirectWeightWritesTrainBitIdenticallyToTheGraphPath) {
  for (Arch arch : {Arch::Llama, Arch::GPT2}) {
    const ModelConfig c = tiny(arch);
    AneTrainOptions direct = quiet_options(), graph = quiet_options();
    direct.weight_update = graph.weight_update = UpdateStrategy::WeightsAsInputs;
    direct.verify_every = graph.verify_every = 0;  // only each program's first update is verified
    graph.direct_weight_writes = false;
    const TrainRun a = run_training(c, 5, &direct), b = run_training(c, 5, &graph);
    const int weighted = 5 * c.n_layers;
    EXPECT_EQ(a.updates.written_directly, 4 * weighted) << "updates 2–5 of every program";
    EXPECT_EQ(b.updates.written_directly, 0);
    EXPECT_EQ(a.losses, b.losses) << (arch == Arch::GPT2 ? "gpt2" : "llama");
    EXPECT_TRUE(a.final_params == b.final_params) << "every parameter bit-identical after 5 steps";
  }
}

// On hardware where a reload takes effect, the probe accepts it and it is used throughout.
TEST(AnesimTrain, DeltaReloadIsUsedWhereItWorks) {
  const ModelConfig c = tiny(Arch::Llama);
  AneTrainOptions o = quiet_options();
  o.reload_takes_effect = true;
  TrainRun cpu = run_training(c, 3, nullptr), ane = run_training(c, 3, &o);
  EXPECT_NE(ane.updates.probe.find("verified"), std::string::npos) << ane.updates.probe;
  EXPECT_EQ(ane.updates.strategy, "delta-reload");
  EXPECT_EQ(ane.updates.stale_detected, 0);
  EXPECT_EQ(ane.compiles.front(), ane.compiles.back()) << "a delta reload compiles nothing";
  expect_same_losses(cpu, ane, "stories");
}

TEST(AnesimTrain, WeightsAsInputsKeepTheCompileCountConstant) {
  const ModelConfig c = tiny(Arch::GPT2);
  AneTrainOptions o = quiet_options();
  o.weight_update = UpdateStrategy::WeightsAsInputs;
  o.verify_every = 3;  // periodic verification costs probes, never compiles
  TrainRun ane = run_training(c, 8, &o);
  const int programs = 5 * c.n_layers + 1;  // + the weight-free sdpa_bwd2 shared by the layers
  for (int n : ane.compiles) EXPECT_EQ(n, programs) << "one compile per program for the whole run";
  EXPECT_EQ(ane.budget_used, programs);
  EXPECT_EQ(ane.updates.stale_detected, 0);
  EXPECT_EQ(ane.updates.updates, 8 * 5 * c.n_layers);
  EXPECT_GE(ane.updates.verified, 3 * 5 * c.n_layers) << "updates 1, 4 and 7 of each program are verified";
}

// Recompiling every step would exhaust the compile budget (C9); the runner switches to weights as
// inputs while that still fits, so the run continues in the same process.
TEST(AnesimTrain, RecompileSwitchesBeforeTheBudgetRunsOut) {
  const ModelConfig c = tiny(Arch::Llama);
  AneTrainOptions o = quiet_options();
  o.weight_update = UpdateStrategy::Recompile;
  o.compile_budget = 35;  // 11 programs + one round of 10 recompiles + the switch (10) = 31
  TrainRun cpu = run_training(c, 5, nullptr), ane = run_training(c, 5, &o);
  EXPECT_EQ(ane.updates.budget_switches, 1);
  EXPECT_EQ(ane.updates.strategy, "weights-as-inputs");
  EXPECT_LE(ane.budget_used, 35);
  EXPECT_EQ(ane.compiles[0], 21) << "first update: every weighted program recompiled";
  EXPECT_EQ(ane.compiles[1], 31) << "second update: switched (one compile each)";
  EXPECT_EQ(ane.compiles.back(), 31);
  expect_same_losses(cpu, ane, "stories");
}

// The weight gradients computed on the worker thread while the next layer's programs run are the
// same numbers as computed in line: the same sgemm on the same buffers (two scratch sets alternate,
// four layers so that each set is reused within a backward pass).
TEST(AnesimTrain, OverlappedWeightGradientsAreBitIdentical) {
  for (Arch arch : {Arch::Llama, Arch::GPT2}) {
    const ModelConfig c = tiny(arch, 4);
    AneTrainOptions in_line = quiet_options(), overlapped = quiet_options();
    in_line.overlap_dw = AneTrainOptions::Overlap::Off, overlapped.overlap_dw = AneTrainOptions::Overlap::On;
    TrainRun a = run_training(c, 3, &in_line), b = run_training(c, 3, &overlapped);
    EXPECT_EQ(a.losses, b.losses) << (arch == Arch::GPT2 ? "gpt2" : "llama");
    EXPECT_TRUE(a.first_grads == b.first_grads) << "every gradient bit-identical";
    EXPECT_TRUE(a.final_params == b.final_params) << "every parameter bit-identical after 3 steps";
    EXPECT_GT(b.phases.cpu_dw_s, 0.0) << "the worker's dW time is counted";
    EXPECT_FALSE(a.overlapping);
    EXPECT_TRUE(b.overlapping);
    EXPECT_EQ(a.phases.dw_wait_s, 0.0) << "in line, nothing waits for a worker";
  }
}

// The runner's programs live in a ProgramCache keyed as inference's (model, kernel, layer, bucket,
// weights version). After a run its slots are the training program list, and its statistics are
// what the weight-update strategy costs: a compile is a miss, a compile replacing a program of the
// slot a new weights version and an eviction; keeping the program keeps the version.
namespace {

struct CacheExpectation {
  const char* what;
  AneTrainOptions options;
  std::vector<int64_t> misses;  // after each step
  int64_t evictions = 0;        // after the last step
  uint64_t version = 0;         // of every weighted program after the last step (the shared one stays at 0)
  int outside = 0;              // compiles outside the cache: the delta-reload probe's
};

void expect_cache(const ModelConfig& c, const CacheExpectation& e) {
  SCOPED_TRACE(e.what);
  const TrainRun r = run_training(c, int(e.misses.size()), &e.options);
  ASSERT_EQ(r.cache.size(), e.misses.size());
  for (size_t s = 0; s < r.cache.size(); s++) {
    EXPECT_EQ(r.cache[s].misses, e.misses[s]) << "after step " << s + 1;
    EXPECT_EQ(r.cache[s].hits, 0) << "the runner holds its programs: it never looks one up again";
  }
  EXPECT_EQ(r.cache.back().evictions, e.evictions);
  EXPECT_EQ(r.cache.back().resident, int64_t(r.listed.size())) << "one resident program per slot";
  EXPECT_EQ(r.budget_used, r.cache.back().misses + e.outside) << "the budget counts the cache's compiles";
  ASSERT_EQ(r.cached.size(), r.listed.size());
  std::set<std::tuple<std::string, int, int>> cached, listed;
  for (const frontends::ProgramSpec& p : r.listed) listed.insert({p.kernel, p.layer, p.S});
  for (const runtime::ProgramKey& k : r.cached) {
    cached.insert({k.kernel, k.layer, k.bucket});
    EXPECT_EQ(k.model, e.options.model_name);
    EXPECT_EQ(k.weights_version, k.layer >= 0 ? e.version : 0u) << k.str();
  }
  EXPECT_EQ(cached, listed);
}

}  // namespace

TEST(AnesimTrain, ProgramCacheHoldsTheTrainingProgramsAtTheStrategysVersions) {
  const ModelConfig c = tiny(Arch::Llama);
  const int64_t weighted = 5 * c.n_layers, all = weighted + 1;  // + the weight-free sdpa_bwd2
  AneTrainOptions o = quiet_options();
  o.model_name = "tiny-llama";
  o.weight_update = UpdateStrategy::WeightsAsInputs;
  expect_cache(c, {"weights as inputs: compiled once", o, {all, all, all}, 0, 0});
  o.weight_update = UpdateStrategy::Auto;  // the probe finds a delta reload stale (two compiles of its own)
  expect_cache(c, {"auto on anesim: weights as inputs", o, {all, all, all}, 0, 0, 2});
  o.weight_update = UpdateStrategy::Recompile;
  expect_cache(
      c, {"recompile: a version per update", o, {all + weighted, all + 2 * weighted, all + 3 * weighted}, 3 * weighted, 3});
  o.weight_update = UpdateStrategy::DeltaReload;
  expect_cache(
      c, {"stale delta reload: one fallback compile", o, {all + weighted, all + weighted, all + weighted}, weighted, 1});
  o.compile_budget = 35;  // as RecompileSwitchesBeforeTheBudgetRunsOut: one round of recompiles, then the switch
  o.weight_update = UpdateStrategy::Recompile;
  expect_cache(
      c,
      {"recompile, then weights as inputs", o, {all + weighted, all + 2 * weighted, all + 2 * weighted}, 2 * weighted, 2});
  o.compile_budget = 0, o.weight_update = UpdateStrategy::Auto, o.reload_takes_effect = true;  // the probe's one compile
  expect_cache(c, {"delta reload where it works", o, {all, all, all}, 0, 0, 1});
}
