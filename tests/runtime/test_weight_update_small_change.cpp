// Weight updates as small as one AdamW step at a low learning rate: they move a kernel's outputs
// far less than any fixed tolerance, so a reload that silently kept the old weights (C10) would be
// "within tolerance" of the new reference. Verification compares the kernel's change with the
// expected one instead — including when the staleness begins in the middle of a run.
#include <gtest/gtest.h>

#include <random>

#include "anesim_runtime_util.h"
#include "runtime/weight_update.h"

namespace orion::runtime {
namespace {

constexpr int C = 768, S = 32;
constexpr double kLearningRate = 5e-5, kWeightDecay = 0.1;

// y = conv(x, W): W ~ N(0, 0.02), as a model's projections are initialised.
ir::Graph conv_graph() {
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 0.02f);
  std::vector<float> w(size_t(C) * C);
  for (float& v : w) v = n(rng);
  ir::Graph g("proj");
  ir::Value x = g.input("x", {ir::ElemType::F16, {1, C, 1, S}});
  g.add_output("y", g.add_node(ir::Op::Conv1x1, {x, g.constant_f32("w", {C, C, 1, 1}, w)}, {}, "y"));
  return g;
}

// One AdamW step on W for a random gradient. On the first step Adam's normalised update m̂/√v̂ is
// sign(g) (bias-corrected moments of one gradient), so the step is lr·(sign(g) + wd·W); later
// steps are the same size, which is what matters here.
TensorMap adamw_step(const ir::Graph& g, uint32_t seed) {
  ir::Tensor32 w = ir::const_values(g.node(g.find("w")));
  std::mt19937 rng(seed);
  std::normal_distribution<float> grad(0.0f, 1.0f);
  for (float& v : w.data) v -= float(kLearningRate * ((grad(rng) > 0 ? 1.0 : -1.0) + kWeightDecay * v));
  return {{"w", w}};
}

TensorMap probe() { return {{"x", test::uniform_tensor({1, C, 1, S}, 3)}}; }

// Forwards to anesim (on which a reload takes effect) — until `working_reloads` reloads have
// been made; from then on a reload leaves the old weights, as the hardware does (C10).
class ReloadStopsWorking final : public Driver {
 public:
  explicit ReloadStopsWorking(int working_reloads)
      : inner_(test::anesim_driver({.reload_takes_effect = true})), left_(working_reloads) {}
  std::string name() const override { return "anesim"; }
  const compiler::ChipProfile& chip() const override { return inner_->chip(); }
  std::unique_ptr<DriverProgram> compile(const std::string& mil, const WeightDict& w, const std::string& n) override {
    return inner_->compile(mil, w, n);
  }
  void load(DriverProgram& p) override { inner_->load(p); }
  void unload(DriverProgram& p) override { inner_->unload(p); }
  void replace_weight_files(DriverProgram& p, const WeightDict& w) override {
    if (left_-- > 0) inner_->replace_weight_files(p, w);
  }
  void evaluate(DriverProgram& p, const std::vector<Surface*>& in, const std::vector<Surface*>& out) override {
    inner_->evaluate(p, in, out);
  }
  const DriverCounters& counters() const override { return inner_->counters(); }

 private:
  std::unique_ptr<Driver> inner_;
  int left_;
};

UpdateResult quiet_update(UpdatableKernel& k, const TensorMap& w) {
  testing::internal::CaptureStderr();  // a fallback notes itself on stderr
  UpdateResult r = update_weights(k, w, UpdateStrategy::DeltaReload);
  testing::internal::GetCapturedStderr();
  return r;
}

TEST(anesim_SmallUpdate, OneAdamWStepIsBelowTheFixedTolerance) {
  // The premise: the step moves the outputs by less than a quarter of the tolerance, where the
  // "half the update's change" rule does not look, yet by more than one fp16 step.
  const ir::Graph g = conv_graph(), g1 = with_weights(g, adamw_step(g, 1));
  const double change = test::relative_error(ir::interpret_named(g1, probe()).at("y"), ir::interpret_named(g, probe()).at("y"));
  EXPECT_LT(change, Verification{}.tolerance / 4);
  EXPECT_GT(change, 1e-3);
}

TEST(anesim_SmallUpdate, StaleReloadOfOneAdamWStepIsDetected) {
  auto driver = test::anesim_driver();  // reloads keep the compiled weights
  CompileBudget budget = CompileBudget::for_driver(*driver);
  UpdatableKernel k(*driver, budget, conv_graph());
  const TensorMap w1 = adamw_step(k.graph(), 1);
  UpdateResult r = quiet_update(k, w1);
  EXPECT_TRUE(r.stale_detected);
  EXPECT_EQ(r.used, UpdateStrategy::WeightsAsInputs);
  ASSERT_FALSE(r.attempts.empty());
  EXPECT_NE(r.attempts[0].find("delta-reload: stale results (outputs unchanged"), std::string::npos) << r.attempts[0];
  // The kernel now computes with the new weights.
  const TensorMap in = probe();
  EXPECT_LT(test::relative_error(k.run(in).at("y"), ir::interpret_named(k.graph(), in).at("y")), 5e-3);
}

TEST(anesim_SmallUpdate, ReloadThatTakesEffectIsKept) {
  auto driver = test::anesim_driver({.reload_takes_effect = true});
  CompileBudget budget = CompileBudget::for_driver(*driver);
  UpdatableKernel k(*driver, budget, conv_graph());
  for (uint32_t step = 1; step <= 3; step++) {
    UpdateResult r = quiet_update(k, adamw_step(k.graph(), step));
    EXPECT_EQ(r.used, UpdateStrategy::DeltaReload) << step << ": " << r.message;
    EXPECT_FALSE(r.stale_detected) << step;
  }
  EXPECT_EQ(budget.used(), 1);  // only the first compile
}

TEST(anesim_SmallUpdate, StalenessBeginningMidRunIsCaughtAtItsFirstStep) {
  ReloadStopsWorking driver(3);
  CompileBudget budget = CompileBudget::for_driver(driver);
  UpdatableKernel k(driver, budget, conv_graph());
  const TensorMap in = probe();
  for (uint32_t step = 1; step <= 6; step++) {
    SCOPED_TRACE(step);
    const ir::Graph before = k.graph();
    UpdateResult r = quiet_update(k, adamw_step(k.graph(), step));
    if (step <= 3) {
      EXPECT_EQ(r.used, UpdateStrategy::DeltaReload) << r.message;
      EXPECT_FALSE(r.stale_detected);
    } else if (step == 4) {  // the first reload that did not take effect
      EXPECT_TRUE(r.stale_detected);
      EXPECT_EQ(r.used, UpdateStrategy::WeightsAsInputs) << r.message;
    } else {  // streaming weights now: nothing to reload
      EXPECT_EQ(r.used, UpdateStrategy::WeightsAsInputs) << r.message;
    }
    // Whatever the strategy, the kernel follows the weights step by step: nearer the new
    // reference than the step's own change.
    const ir::Tensor32 got = k.run(in).at("y"), want = ir::interpret_named(k.graph(), in).at("y");
    const double step_change = test::relative_error(ir::interpret_named(before, in).at("y"), want);
    EXPECT_LT(test::relative_error(got, want), step_change / 2);
  }
}

}  // namespace
}  // namespace orion::runtime
