// The training loop on a tiny Llama and a small slice of the built-in corpus: the loss falls,
// the schedule has its shape, the NaN/Inf guard skips a poisoned step without touching the
// weights, and too many bad steps in a row stop the run with a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "base/error.h"
#include "support.h"
#include "train/model/guards.h"
#include "train/loop/trainer.h"

using namespace orion;
using namespace orion::train;

namespace {

std::string tiny_config(const std::string& dir) {
  const std::string path = dir + "/tiny.json";
  std::ofstream(path) << R"({"arch": "llama", "dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4,
                            "n_kv_heads": 2, "vocab_size": 300, "seq_len": 64})";
  return path;
}

TrainOptions tiny_options(const std::string& dir, int64_t steps) {
  TrainOptions o;
  o.config = tiny_config(dir);
  o.data = "builtin:300";
  o.vocab = 300;
  o.batch = 4, o.seq = 32, o.steps = steps;
  o.lr = 1e-2f;
  o.eval_every = 0, o.eval_batches = 4, o.checkpoint_every = 0;
  o.sample_tokens = 0, o.progress = false;
  o.out = dir;
  return o;
}

}  // namespace

TEST(Trainer, LossFallsOnTheBuiltinCorpus) {
  const std::string dir = test::temp_dir();
  Trainer t(tiny_options(dir, 60));
  const float val0 = t.evaluate();
  const double h1 = t.unigram_entropy();
  TrainResult r = t.run();
  std::printf("  loss %.3f → %.3f, val %.3f → %.3f, unigram entropy %.3f\n", r.first_loss, r.last_loss, val0, r.val_loss,
              h1);
  EXPECT_NEAR(val0, std::log(300.0f), 0.15f) << "a fresh model guesses uniformly";
  EXPECT_LT(r.val_loss, val0 - 2.0f) << "60 steps take a tiny model from uniform guessing to about word frequencies";
  EXPECT_LT(r.val_loss, h1 + 0.2) << "…and close to the unigram entropy (the demo's bigger model goes clearly below)";
  EXPECT_EQ(r.skipped_steps, 0);
  EXPECT_TRUE(std::filesystem::exists(r.model)) << "the model is exported at the end";
  EXPECT_TRUE(std::filesystem::exists(r.checkpoint));
}

TEST(Trainer, ScheduleWarmsUpThenDecays) {
  TrainOptions o;
  o.lr = 1.0f, o.steps = 110, o.warmup = 10, o.min_lr_ratio = 0.1f;
  EXPECT_FLOAT_EQ(o.lr_at(0), 0.1f);
  EXPECT_FLOAT_EQ(o.lr_at(9), 1.0f);
  EXPECT_FLOAT_EQ(o.lr_at(10), 1.0f);
  EXPECT_NEAR(o.lr_at(60), 0.55f, 1e-6f);  // halfway down the cosine
  EXPECT_NEAR(o.lr_at(109), 0.1f, 1e-3f);
  o.plain();
  EXPECT_FLOAT_EQ(o.lr_at(0), 1.0f);
  EXPECT_FLOAT_EQ(o.lr_at(109), 1.0f);
  EXPECT_EQ(o.clip, 0.0f);
  EXPECT_FALSE(o.shuffle);
}

TEST(Trainer, NanGuardSkipsAPoisonedStep) {
  const std::string dir = test::temp_dir();
  Trainer t(tiny_options(dir, 10));
  t.after_backward = [](int64_t step, Grads& g) {
    if (step == 3) g.data()[5] = NAN;
    if (step == 5) g.data()[7] = INFINITY;
  };
  for (int i = 0; i < 3; ++i) t.step();
  const Params before = t.params().clone();
  const int64_t adam_before = t.optimizer().step_count();
  StepStats s = t.step();  // step 3: poisoned
  EXPECT_TRUE(s.skipped);
  EXPECT_FALSE(std::isfinite(s.grad_norm));
  EXPECT_EQ(0, std::memcmp(before.data(), t.params().data(), before.size() * sizeof(float)))
      << "a skipped step changed weights";
  EXPECT_EQ(t.optimizer().step_count(), adam_before) << "a skipped step advanced AdamW";
  EXPECT_EQ(t.step_index(), 4) << "the step (and its batch) is consumed";
  EXPECT_FALSE(t.step().skipped);
  EXPECT_TRUE(t.step().skipped);  // step 5: Inf
  TrainResult r = t.run();
  EXPECT_EQ(r.skipped_steps, 2);
  EXPECT_EQ(count_nonfinite(t.params().data(), t.params().size()), 0u);
  EXPECT_TRUE(std::isfinite(r.last_loss));
}

TEST(Trainer, StopsAfterConsecutiveBadSteps) {
  const std::string dir = test::temp_dir();
  TrainOptions o = tiny_options(dir, 20);
  o.max_bad_steps = 3;
  Trainer t(o);
  t.after_backward = [](int64_t step, Grads& g) {
    if (step >= 2) g.data()[0] = NAN;
  };
  try {
    t.run();
    FAIL() << "expected the run to stop";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("3 consecutive steps"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--lr"), std::string::npos) << "the hint says what to try";
  }
  EXPECT_EQ(t.step_index(), 5);
  EXPECT_EQ(count_nonfinite(t.params().data(), t.params().size()), 0u);
}

TEST(Trainer, SanitizeRepairsInsteadOfSkipping) {
  const std::string dir = test::temp_dir();
  TrainOptions o = tiny_options(dir, 3);
  o.sanitize_grads = true;
  Trainer t(o);
  t.after_backward = [](int64_t, Grads& g) { g.data()[0] = NAN, g.data()[1] = -INFINITY; };
  StepStats s = t.step();
  EXPECT_FALSE(s.skipped);
  EXPECT_EQ(s.sanitized, 2u);
  float x[4] = {NAN, INFINITY, -70000.0f, 1.0f};
  EXPECT_EQ(sanitize_fp16(x, 4), 3u);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[1], kFp16Max);
  EXPECT_EQ(x[2], -kFp16Max);
  EXPECT_EQ(x[3], 1.0f);
}

TEST(Trainer, GradientAccumulationAveragesMicroBatches) {
  // accum 2 × batch 2: every step reads two batches, averages their gradients, and still learns.
  const std::string dir = test::temp_dir();
  TrainOptions o = tiny_options(dir, 20);
  o.batch = 2, o.accum = 2;
  Trainer t(o);
  TrainResult r = t.run();
  EXPECT_LT(r.last_loss, r.first_loss - 0.5f);
  EXPECT_EQ(t.state().data_position, 40u) << "two batches per step";
}
