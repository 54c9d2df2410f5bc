// Weight updates on anesim (DESIGN.md §6): weights as inputs against baked weights, the stale
// delta reload (C10) caught by verification and recovered, the other strategies, and what happens
// when no strategy can run.
#include <gtest/gtest.h>

#include "anesim_runtime_util.h"
#include "model/frontend_test_util.h"
#include "runtime/program_cache.h"
#include "runtime/weight_update.h"
#include "runtime/weights_as_inputs.h"

namespace orion::runtime {
namespace {

using ir::Tensor32;
using test::anesim_driver;
using Mode = UpdatableKernel::Mode;

constexpr int S = 16;

// The GPT-2 FFN sublayer of a tiny model (C = 32, H = 128): conv weights, biases, LayerNorm
// weights — every kind of constant a kernel carries. seed picks the weights.
ir::Graph ffn_graph(uint64_t seed) {
  ModelConfig c = test::tiny_config(Arch::GPT2);
  return frontends::gpt2_prefill_ffn(test::test_weights(c, seed, 8.0f), 0, S);
}

TensorMap ffn_input(uint32_t seed) { return {{"x", test::random_tensor({1, 32, 1, S}, seed)}}; }

double error_vs(const ir::Graph& g, const TensorMap& in, const TensorMap& got) {
  return test::relative_error(got.at("y"), ir::interpret_named(g, in).at("y"));
}

TEST(anesim_WeightsAsInputs, TransformTurnsConstantsIntoBoundaryInputs) {
  ir::Graph g = ffn_graph(1);
  const size_t inputs_before = g.input_nodes().size();
  std::vector<WeightInput> w = weights_to_inputs(g);
  ASSERT_GE(w.size(), 4u);  // fc and proj weights and biases, LayerNorm weight and bias
  EXPECT_EQ(g.input_nodes().size(), inputs_before + w.size());
  EXPECT_EQ(g.verify(), "");
  for (const WeightInput& wi : w) {
    const ir::Type& t = g.node(g.find(wi.name)).results[0];
    EXPECT_EQ(g.node(g.find(wi.name)).op, ir::Op::Input) << wi.name;
    EXPECT_EQ(t, wi.declared);
    ASSERT_EQ(t.shape.size(), 4u);
    EXPECT_TRUE(t.shape[0] == 1 && t.shape[2] == 1) << wi.name << " " << t.str() << " is not [1, C, 1, S] (C14)";
    EXPECT_GE(int64_t(t.bytes()), compiler::default_chip().min_buffer_bytes) << wi.name << " is below C7";
    EXPECT_NE(t.shape[3], S) << wi.name << " shares the activations' sequence length";
  }
  for (const ir::Node& n : g.nodes())
    if (n.op == ir::Op::Const) EXPECT_LE(n.results[0].numel(), 1) << n.name << " is still baked in";
}

TEST(anesim_WeightsAsInputs, SameResultsAsBakedWeights) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  ir::Graph g = ffn_graph(1);
  UpdatableKernel baked(*driver, budget, g, Mode::BakedWeights);
  UpdatableKernel streamed(*driver, budget, g, Mode::WeightsAsInputs);
  EXPECT_EQ(streamed.kernel().program().blob_constants, 0) << "weights still compiled into the program";
  EXPECT_GT(baked.kernel().program().blob_constants, 0);
  for (uint32_t seed : {1u, 2u, 3u}) {
    TensorMap in = ffn_input(seed);
    TensorMap a = baked.run(in), b = streamed.run(in);
    EXPECT_LE(test::relative_error(b.at("y"), a.at("y")), 1e-2) << "seed " << seed;
    EXPECT_LE(error_vs(g, in, b), 1e-2);
    EXPECT_GT(test::relative_error(a.at("y"), in.at("x")), 0.1) << "the kernel computed nothing";
  }
}

// A weight whose rows are as long as the activations' sequence (W [64, 32] with S = 32) would be
// padded along with the small activation by legalize-ane (C7) and break the reshape: it is laid out
// flat, [1, N, 1, 1], and the kernel still compiles and agrees with the baked one.
TEST(anesim_WeightsAsInputs, WeightRowsAsLongAsTheSequenceAreLaidOutFlat) {
  ir::Graph g("collide");
  ir::Value x = g.input("x", {ir::ElemType::F16, {1, 32, 1, 32}});
  ir::Tensor32 wv = test::random_tensor({64, 32, 1, 1}, 21, 0.2f);
  ir::Value w = g.constant_f32("w", {64, 32, 1, 1}, wv.data);
  g.add_output("y", g.add_node(ir::Op::Relu, {g.add_node(ir::Op::Conv1x1, {x, w})}));
  ir::Graph streamed_graph = g;
  std::vector<WeightInput> wi = weights_to_inputs(streamed_graph);
  ASSERT_EQ(wi.size(), 1u);
  EXPECT_EQ(wi[0].declared.shape[3], 1);
  EXPECT_GE(wi[0].declared.shape[1], 64 * 32);

  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  UpdatableKernel baked(*driver, budget, g), streamed(*driver, budget, g, Mode::WeightsAsInputs);
  TensorMap in = {{"x", test::random_tensor({1, 32, 1, 32}, 22)}};
  EXPECT_LE(test::relative_error(streamed.run(in).at("y"), baked.run(in).at("y")), 1e-2);
  EXPECT_LE(test::relative_error(streamed.run(in).at("y"), ir::interpret_named(g, in).at("y")), 1e-2);
}

TEST(anesim_WeightUpdate, StaleDeltaReloadIsDetectedAndRecovered) {
  auto driver = anesim_driver();  // default: reloading weight files changes nothing (C10)
  CompileBudget budget = CompileBudget::for_driver(*driver);
  ir::Graph old_g = ffn_graph(1), new_g = ffn_graph(2);
  UpdatableKernel k(*driver, budget, old_g);
  testing::internal::CaptureStderr();
  UpdateResult r = update_weights(k, new_g);
  const std::string note = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.requested, UpdateStrategy::Auto);
  EXPECT_EQ(r.used, UpdateStrategy::WeightsAsInputs);
  EXPECT_TRUE(r.stale_detected);
  EXPECT_TRUE(r.verified);
  EXPECT_LE(r.max_error, 2e-2);
  EXPECT_EQ(r.compiles, 1);
  ASSERT_EQ(r.attempts.size(), 1u);
  EXPECT_NE(r.attempts[0].find("delta-reload: stale"), std::string::npos) << r.attempts[0];
  EXPECT_NE(r.message.find("weights-as-inputs"), std::string::npos) << r.message;
  EXPECT_NE(note.find("stale"), std::string::npos) << "the fallback was not reported: " << note;
  EXPECT_EQ(k.mode(), Mode::WeightsAsInputs);
  TensorMap in = ffn_input(7);
  EXPECT_LE(error_vs(new_g, in, k.run(in)), 1e-2);
  // Later updates stream new weights: no compile, no stale attempt.
  ir::Graph third = ffn_graph(3);
  UpdateResult r2 = update_weights(k, third);
  EXPECT_EQ(r2.used, UpdateStrategy::WeightsAsInputs);
  EXPECT_EQ(r2.compiles, 0);
  EXPECT_TRUE(r2.attempts.empty());
  EXPECT_LE(error_vs(third, in, k.run(in)), 1e-2);
}

// A small update — the matrices 0.5% larger, as a low learning rate makes them — moves the outputs
// by less than the tolerance: a stale reload, which keeps the old outputs, is still within it of
// the new reference. It is caught because it did not move the outputs towards the new ones.
TEST(anesim_WeightUpdate, StaleDeltaReloadOfASmallUpdateIsDetected) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  ModelConfig c = test::tiny_config(Arch::GPT2);
  ir::Graph old_g = frontends::gpt2_prefill_ffn(test::test_weights(c, 1, 8.0f), 0, S);
  ir::Graph new_g = frontends::gpt2_prefill_ffn(test::test_weights(c, 1, 8.0f * 1.005f), 0, S);
  TensorMap in = ffn_input(7);
  const double change = test::relative_error(ir::interpret_named(old_g, in).at("y"), ir::interpret_named(new_g, in).at("y"));
  EXPECT_GT(change, 5e-3) << "the update must move the outputs beyond fp16 noise";
  EXPECT_LT(change, 2e-2) << "and by less than the tolerance, or this tests nothing new";
  UpdatableKernel k(*driver, budget, old_g);
  testing::internal::CaptureStderr();
  UpdateResult r = update_weights(k, new_g, UpdateStrategy::DeltaReload);
  testing::internal::GetCapturedStderr();
  EXPECT_TRUE(r.stale_detected);
  EXPECT_EQ(r.used, UpdateStrategy::WeightsAsInputs);
  ASSERT_FALSE(r.attempts.empty());
  EXPECT_NE(r.attempts[0].find("half the update's change"), std::string::npos) << r.attempts[0];
  EXPECT_LE(error_vs(new_g, in, k.run(in)), change / 2);
}

// Where the reload takes effect, the same small update is accepted as it is.
TEST(anesim_WeightUpdate, SmallDeltaReloadIsKeptWhereReloadTakesEffect) {
  auto driver = anesim_driver({.reload_takes_effect = true});
  CompileBudget budget = CompileBudget::for_driver(*driver);
  ModelConfig c = test::tiny_config(Arch::GPT2);
  UpdatableKernel k(*driver, budget, frontends::gpt2_prefill_ffn(test::test_weights(c, 1, 8.0f), 0, S));
  UpdateResult r = update_weights(k, frontends::gpt2_prefill_ffn(test::test_weights(c, 1, 8.0f * 1.005f), 0, S));
  EXPECT_EQ(r.used, UpdateStrategy::DeltaReload);
  EXPECT_FALSE(r.stale_detected);
}

TEST(anesim_WeightUpdate, UnverifiedDeltaReloadKeepsTheOldWeights) {
  // What verification protects against: the reload "succeeds" and the old weights stay.
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  ir::Graph old_g = ffn_graph(1), new_g = ffn_graph(2);
  UpdatableKernel k(*driver, budget, old_g);
  UpdateResult r = update_weights(k, new_g, UpdateStrategy::DeltaReload, {.enabled = false});
  EXPECT_EQ(r.used, UpdateStrategy::DeltaReload);
  EXPECT_FALSE(r.verified);
  EXPECT_EQ(r.compiles, 0);
  TensorMap in = ffn_input(8);
  TensorMap out = k.run(in);
  EXPECT_LE(error_vs(old_g, in, out), 1e-2);
  EXPECT_GT(error_vs(new_g, in, out), 0.1);
}

TEST(anesim_WeightUpdate, DeltaReloadIsKeptWhereReloadTakesEffect) {
  auto driver = anesim_driver({.reload_takes_effect = true});
  CompileBudget budget = CompileBudget::for_driver(*driver);
  UpdatableKernel k(*driver, budget, ffn_graph(1));
  ir::Graph new_g = ffn_graph(2);
  UpdateResult r = update_weights(k, new_g);
  EXPECT_EQ(r.used, UpdateStrategy::DeltaReload);
  EXPECT_TRUE(r.verified);
  EXPECT_FALSE(r.stale_detected);
  EXPECT_EQ(r.compiles, 0);
  EXPECT_EQ(k.mode(), Mode::BakedWeights);
  TensorMap in = ffn_input(9);
  EXPECT_LE(error_vs(new_g, in, k.run(in)), 1e-2);
}

TEST(anesim_WeightUpdate, RecompileSwapsInANewProgram) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  UpdatableKernel k(*driver, budget, ffn_graph(1));
  const AneKernel* before = &k.kernel();
  ir::Graph new_g = ffn_graph(2);
  UpdateResult r = update_weights(k, new_g, UpdateStrategy::Recompile);
  EXPECT_EQ(r.used, UpdateStrategy::Recompile);
  EXPECT_TRUE(r.verified);
  EXPECT_EQ(r.compiles, 1);
  EXPECT_NE(&k.kernel(), before);
  EXPECT_EQ(driver->counters().compiles, 2);
  TensorMap in = ffn_input(10);
  EXPECT_LE(error_vs(new_g, in, k.run(in)), 1e-2);
}

TEST(anesim_WeightUpdate, NamedWeightsAndACallerReference) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  ir::Graph g = ffn_graph(1);
  UpdatableKernel k(*driver, budget, g, Mode::WeightsAsInputs);
  // New values for the largest constant, with the probe and reference given by the caller.
  const ir::Node* big = nullptr;
  for (const ir::Node& n : g.nodes())
    if (n.op == ir::Op::Const && (!big || n.results[0].numel() > big->results[0].numel())) big = &n;
  ASSERT_NE(big, nullptr);
  TensorMap w = {{big->name, test::random_tensor(big->results[0].shape, 11, 0.3f)}};
  ir::Graph expected = with_weights(g, w);
  Verification v;
  v.probe = ffn_input(12);
  int reference_calls = 0;
  v.reference = [&](const TensorMap& in) {
    reference_calls++;
    return ir::interpret_named(expected, in);
  };
  UpdateResult r = update_weights(k, w, UpdateStrategy::Auto, v);
  EXPECT_EQ(reference_calls, 1);
  EXPECT_EQ(r.used, UpdateStrategy::WeightsAsInputs);
  EXPECT_EQ(r.compiles, 0);
  EXPECT_TRUE(r.verified);
  EXPECT_LE(error_vs(expected, v.probe, k.run(v.probe)), 1e-2);
  EXPECT_GT(error_vs(g, v.probe, k.run(v.probe)), 1e-2) << "the new weights made no difference";
  EXPECT_THROW(with_weights(g, {{"no_such_weight", Tensor32({1})}}), Error);
}

TEST(anesim_WeightUpdate, FailsLoudlyWhenNoStrategyCanRun) {
  auto driver = anesim_driver();  // stale reloads
  CompileBudget budget(1);        // the first compile spends it: no fallback can compile
  UpdatableKernel k(*driver, budget, ffn_graph(1));
  try {
    update_weights(k, ffn_graph(2));
    FAIL() << "a stale update with no budget left was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(e.message().find("delta-reload: stale"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("compile budget"), std::string::npos) << e.message();
  }
  EXPECT_EQ(driver->counters().compiles, 1);
}

// In a shared program cache every compile is the slot's next weights version, which evicts (and
// unloads) the program before it; an update that keeps the program keeps the version.
TEST(anesim_WeightUpdate, CompilesInAProgramCacheAreTheSlotsNextVersion) {
  auto driver = anesim_driver();  // stale reloads
  CompileBudget budget = CompileBudget::for_driver(*driver);
  ProgramCache cache(*driver, budget);
  UpdatableKernel k(cache, {"toy", "ffn", 0, S, 0}, ffn_graph(1));
  const std::shared_ptr<AneKernel> first = cache.find(k.key());
  EXPECT_EQ(first.get(), &k.kernel());
  update_weights(k, ffn_graph(2), UpdateStrategy::Recompile);
  EXPECT_EQ(k.key().weights_version, 1u);
  EXPECT_FALSE(first->loaded()) << "the replaced program must be unloaded";
  EXPECT_EQ(cache.find(k.key()).get(), &k.kernel());
  update_weights(k, ffn_graph(3), UpdateStrategy::WeightsAsInputs);  // the switch compiles once
  EXPECT_EQ(k.key().weights_version, 2u);
  const UpdateResult r = update_weights(k, ffn_graph(4), UpdateStrategy::WeightsAsInputs);
  EXPECT_EQ(r.compiles, 0);
  EXPECT_EQ(k.key().weights_version, 2u) << "streamed weights keep the program";
  update_weights(k, ffn_graph(5));  // Auto on a streaming kernel: streams again
  EXPECT_EQ(k.key().weights_version, 2u);
  const CacheStats s = cache.stats();
  EXPECT_EQ(s.misses, 3);
  EXPECT_EQ(s.evictions, 2);
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(s.resident, 1);
  EXPECT_EQ(s.misses, budget.used()) << "every compile went through the cache";
  ASSERT_EQ(cache.keys().size(), 1u);
  EXPECT_EQ(cache.keys()[0].str(), "toy/ffn/layer0/S16/v2");
}

}  // namespace
}  // namespace orion::runtime
