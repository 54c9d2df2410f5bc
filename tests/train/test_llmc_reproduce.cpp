// Orion's trainer reproduces llm.c's printed losses step by step.
//
// tests/testdata/train/llmc/ holds what llm.c's CPU reference (train_gpt2.c) saw — a small random
// GPT-2 checkpoint in llm.c's v3 format (written by Orion's llm.c writer; V 256 padded to Vp 320,
// so the padding rows are exercised) and llm.c token files (magic 20240520) — and the losses it
// printed: golden.json, made by scripts/golden/make_llmc_reference.py (which says how llm.c was
// patched: paths, B/T/steps from argv, no shuffling, no sampling). llm.c's loop, mirrored here:
//
//   for step in 0..40:
//     if step % 10 == 0: val loss = mean over the first 5 validation batches (sequential)
//     next sequential batch of B×T tokens → forward, zero_grad, backward,
//     AdamW(lr 1e-4, β1 0.9, β2 0.999, ε 1e-8, weight decay 0, bias-corrected, t = step+1)
//
// Orion runs the same with TrainOptions::plain() (constant lr, no warmup, no clipping, no weight
// decay, sequential batches) and --init from the llm.c file. Both compute in fp32 but in different
// summation orders (llm.c's loops vs Orion's tiled GEMMs), so the losses agree to rounding, not to
// the bit: the test asks for |Δ| ≤ 1e-4 on every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "support.h"
#include "train/loop/trainer.h"

using namespace orion;
using namespace orion::train;

namespace {

constexpr double kTolerance = 1e-4;

nlohmann::json load_golden() { return nlohmann::json::parse(read_text_file(test::data_path("train/llmc/golden.json"))); }

TrainOptions llmc_options(const nlohmann::json& g, const std::string& out) {
  TrainOptions o;
  o.plain();
  o.init = test::data_path("train/llmc/" + g["model"].get<std::string>());
  o.data = test::data_path("train/llmc");  // tiny_train.bin and tiny_val.bin, told apart by name
  o.batch = g["B"], o.seq = g["T"];
  o.steps = int64_t(g["train_loss"].size());
  o.lr = g["lr"], o.beta1 = g["beta1"], o.beta2 = g["beta2"], o.eps = g["eps"], o.weight_decay = g["weight_decay"];
  o.eval_every = 0, o.eval_batches = g["val_batches"], o.checkpoint_every = 0;
  o.export_format = "none", o.sample_tokens = 0, o.progress = false;
  o.out = out;
  return o;
}

}  // namespace

TEST(LlmcReproduce, PlainOptionsAreLlmcs) {
  TrainOptions o;
  o.plain();
  EXPECT_EQ(o.schedule, "constant");
  EXPECT_EQ(o.warmup_steps(), 0);
  EXPECT_EQ(o.clip, 0.0f);
  EXPECT_EQ(o.weight_decay, 0.0f);
  EXPECT_FALSE(o.shuffle);
  for (int64_t s : {0, 1, 17, 40}) EXPECT_EQ(o.lr_at(s), o.lr) << "constant learning rate at step " << s;
}

TEST(LlmcReproduce, TrainAndValLossesMatchLlmcEveryStep) {
  const nlohmann::json g = load_golden();
  const auto& want = g["train_loss"];
  const auto& want_val = g["val_loss"];
  ASSERT_GE(want.size(), 10u);
  Trainer t(llmc_options(g, test::temp_dir()));
  ASSERT_EQ(t.params().config().padded_vocab, 320) << "the checkpoint's padding rows are part of the test";

  double worst = 0, worst_val = 0;
  int vals = 0;
  const int every = g["val_every"];
  for (size_t s = 0; s < want.size(); ++s) {
    if (s % size_t(every) == 0) {
      const double val = t.evaluate(), ref = want_val.at(std::to_string(s)).get<double>();
      EXPECT_NEAR(val, ref, kTolerance) << "validation loss before step " << s;
      worst_val = std::max(worst_val, std::fabs(val - ref));
      ++vals;
    }
    const StepStats st = t.step();
    const double ref = want[s].get<double>();
    ASSERT_FALSE(st.skipped) << "step " << s;
    EXPECT_NEAR(st.loss, ref, kTolerance) << "train loss of step " << s;
    worst = std::max(worst, std::fabs(double(st.loss) - ref));
  }
  std::printf("  %zu steps: largest |Δ train loss| %.2e, %d validations: largest |Δ val loss| %.2e (tolerance %.0e)\n",
              want.size(), worst, vals, worst_val, kTolerance);
  // The run must have learned something, or agreement would be cheap.
  EXPECT_LT(want.back().get<double>(), want[0].get<double>() - 0.2);
}
