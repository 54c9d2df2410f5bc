// Mixed-precision training on the CPU (--precision bf16 | fp16): a small Llama on the built-in
// corpus, its loss curve against the fp32 run's step by step; fp16's dynamic loss scaling skipping
// and backing off on an overflow without stopping the run; the precision kept by a checkpoint.
// (scripts/mixed_precision_curve.sh runs the same comparison through the CLI on a bigger model.)
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "base/error.h"
#include "base/file.h"
#include "runtime/cpu/train_kernels.h"
#include "support.h"
#include "train/loop/trainer.h"

using namespace orion;
using namespace orion::train;

namespace {

std::string small_config(const std::string& dir) {
  const std::string path = dir + "/small.json";
  std::ofstream(path) << R"({"arch": "llama", "dim": 64, "hidden_dim": 128, "n_layers": 2, "n_heads": 4,
                            "n_kv_heads": 2, "vocab_size": 300, "seq_len": 64})";
  return path;
}

TrainOptions small_options(const std::string& dir, int64_t steps, const std::string& precision) {
  TrainOptions o;
  o.config = small_config(dir);
  o.data = "builtin:300";
  o.vocab = 300;
  o.batch = 4, o.seq = 32, o.steps = steps;
  o.lr = 3e-3f;
  o.eval_every = 0, o.eval_batches = 2, o.checkpoint_every = 0, o.export_format = "none";
  o.sample_tokens = 0, o.progress = false;
  o.out = dir, o.precision = precision;
  return o;
}

std::vector<float> losses(const std::string& dir, int64_t steps, const std::string& precision) {
  Trainer t(small_options(dir, steps, precision));
  EXPECT_EQ(cpu::train_gemm_precision(), t.options().gemm_precision());
  std::vector<float> out;
  for (int64_t s = 0; s < steps; s++) {
    const StepStats st = t.step();
    EXPECT_FALSE(st.skipped) << precision << " step " << s;
    out.push_back(st.loss);
  }
  return out;
}

// The largest |a − b| / b over the steps, each loss first averaged over a window of 5 steps
// (the curve; a single step's loss is one batch's).
double curve_gap(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i + 5 <= a.size(); i++) {
    double sa = 0, sb = 0;
    for (size_t k = i; k < i + 5; k++) sa += a[k], sb += b[k];
    worst = std::max(worst, std::fabs(sa - sb) / sb);
  }
  return worst;
}

}  // namespace

TEST(MixedPrecision, Bf16LossCurveTracksFp32) {
  const int64_t steps = 300;  // the issue's length
  const std::vector<float> f32 = losses(test::temp_dir(), steps, "fp32");
  const std::vector<float> bf16 = losses(test::temp_dir(), steps, "bf16");
  EXPECT_EQ(cpu::train_gemm_precision(), cpu::GemmPrecision::F32) << "a finished run restores fp32";
  const double gap = curve_gap(bf16, f32);
  std::printf("  loss fp32 %.4f → %.4f, bf16 %.4f → %.4f; largest gap of the curves %.3f%% (vdpbf16ps: %s)\n", f32[0],
              f32.back(), bf16[0], bf16.back(), 100 * gap, cpu::bf16_dot_available() ? "yes" : "no");
  EXPECT_LT(f32.back(), f32[0] - 1.5f) << "the run learns";
  EXPECT_LT(gap, 0.02);
  EXPECT_NE(bf16, f32) << "bf16 products are not fp32's";
}

TEST(MixedPrecision, Fp16WithDynamicLossScalingTracksFp32) {
  const int64_t steps = 60;
  const std::vector<float> f32 = losses(test::temp_dir(), steps, "fp32");
  const std::vector<float> f16 = losses(test::temp_dir(), steps, "fp16");
  const double gap = curve_gap(f16, f32);
  std::printf("  largest gap of the fp16 curve %.3f%%\n", 100 * gap);
  EXPECT_LT(gap, 0.02);
}

// An Inf in the (scaled) gradients: the step is skipped, the scale halves, and the run goes on even
// with --max-bad-steps 1 (a smaller scale may fix it); the metrics record the scale of each step.
TEST(MixedPrecision, OverflowSkipsTheStepAndHalvesTheScale) {
  const std::string dir = test::temp_dir();
  TrainOptions o = small_options(dir, 6, "fp16");
  o.max_bad_steps = 1, o.loss_scale_window = 2;
  Trainer t(o);
  EXPECT_EQ(t.loss_scaler().mode(), LossScaler::Mode::Dynamic);
  t.after_backward = [](int64_t step, Grads& g) {
    if (step == 2 || step == 3) g.data()[11] = INFINITY;
  };
  const TrainResult r = t.run();
  EXPECT_EQ(r.skipped_steps, 2);
  EXPECT_EQ(t.loss_scaler().overflows(), 2);
  // 2¹⁶ → ×2 after steps 0, 1 → ÷2 twice → ×2 after steps 4, 5.
  EXPECT_EQ(t.loss_scaler().scale(), LossScaler::kInitialScale);
  std::vector<double> scales;
  std::ifstream in(dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) scales.push_back(nlohmann::json::parse(line).at("loss_scale"));
  EXPECT_EQ(scales, (std::vector<double>{65536, 65536, 131072, 65536, 32768, 32768}));
}

TEST(MixedPrecision, CheckpointKeepsThePrecision) {
  const std::string dir = test::temp_dir();
  TrainOptions o = small_options(dir, 3, "bf16");
  EXPECT_EQ(o.numeric_json().at("precision"), "bf16");
  EXPECT_FALSE(small_options(dir, 3, "fp32").numeric_json().contains("precision")) << "fp32 options as before";
  TrainOptions back;
  back.apply_numeric_json(o.numeric_json(), "test");
  EXPECT_EQ(back.precision, "bf16");
  EXPECT_EQ(back.loss_scale_mode(), "none");
  o.precision = "fp8";
  EXPECT_THROW(o.gemm_precision(), Error);
  o.precision = "bf16", o.backend = "anesim";
  EXPECT_THROW(o.validate(), Error) << "the ANE path has its own fp16 programs";
}

// --precision bf16 keeps each weight's bf16 packs from one update to the next
// (runtime/cpu/bf16_weight_packs.h): the run's losses (with evaluations between the updates) and
// its final weights are bit-identical to a run whose products pack every weight themselves
// (ORION_WEIGHT_PACKS=0), and every use of a kept pack is checked against a fresh one.
TEST(MixedPrecision, Bf16KeptWeightPacksTrainBitIdentically) {
  if (!cpu::bf16_dot_available()) GTEST_SKIP() << "no AVX512-BF16 (vdpbf16ps) on this CPU: packs are never kept";
  setenv("ORION_VERIFY_WEIGHT_PACKS", "1", 1);
  auto run = [](bool packs, size_t* pack_bytes) {
    setenv("ORION_WEIGHT_PACKS", packs ? "1" : "0", 1);
    TrainOptions o = small_options(test::temp_dir(), 8, "bf16");
    Trainer t(o);
    std::vector<float> out;
    for (int s = 0; s < 8; s++) {
      out.push_back(t.step().loss);
      if (s % 3 == 2) out.push_back(t.evaluate());  // forward-only passes between updates use the packs too
      if (s == 1) *pack_bytes = cpu::weight_pack_bytes();
    }
    const Params& p = t.params();
    out.insert(out.end(), p.data(), p.data() + p.size());
    return out;
  };
  size_t kept = 0, none = 0;
  const std::vector<float> with = run(true, &kept), without = run(false, &none);
  unsetenv("ORION_WEIGHT_PACKS");
  unsetenv("ORION_VERIFY_WEIGHT_PACKS");
  EXPECT_GT(kept, 0u) << "the bf16 run kept packs";
  EXPECT_EQ(none, 0u) << "ORION_WEIGHT_PACKS=0 keeps none";
  ASSERT_EQ(with.size(), without.size());
  EXPECT_TRUE(with == without) << "losses and weights bit-identical";
}

// Weight gradients zeroed by their first write (train/cpu/first_write_zero.h): runs with two
// micro-batches a step (the second product adds to what the first overwrote), in fp32 and bf16,
// give losses and final weights bit-identical to runs that zero every gradient (ORION_FIRST_WRITE_ZERO=0).
TEST(MixedPrecision, FirstWriteZeroingTrainsBitIdentically) {
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    auto run = [&](bool lazy) {
      setenv("ORION_FIRST_WRITE_ZERO", lazy ? "1" : "0", 1);
      TrainOptions o = small_options(test::temp_dir(), 5, precision);
      o.accum = 2;
      Trainer t(o);
      std::vector<float> out;
      for (int s = 0; s < 5; s++) out.push_back(t.step().loss);
      const Params& p = t.params();
      out.insert(out.end(), p.data(), p.data() + p.size());
      return out;
    };
    const std::vector<float> lazy = run(true), zeroed = run(false);
    unsetenv("ORION_FIRST_WRITE_ZERO");
    ASSERT_EQ(lazy.size(), zeroed.size());
    EXPECT_TRUE(lazy == zeroed) << "losses and weights bit-identical";
  }
}
