// End to end: a tiny model of each family memorises one batch. Forward, backward and AdamW
// together must drive the loss from ~log V (uniform guessing) to near 0 in a few hundred steps;
// any wrong gradient or update stalls it. The curve is printed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/transformer.h"
#include "train/model/trainer_api.h"

using namespace orion;
using namespace orion::train;

namespace {

void overfit(ModelConfig c, int steps, float lr, float threshold) {
  SCOPED_TRACE(c.describe());
  ParamBuffer p(c);
  init_params(p, 42);
  ParamBuffer g(c);
  const int B = 4, T = 16, N = B * T;
  // One batch: random token streams, each target the next token.
  std::mt19937_64 rng(7);
  std::vector<int> stream(size_t(N) + 1);
  for (int& x : stream) x = int(rng() % uint64_t(c.vocab_size));
  std::vector<int> tokens(stream.begin(), stream.end() - 1), targets(stream.begin() + 1, stream.end());
  TrainModel model(p, &g, B, T);
  AdamW opt(p);
  float first = 0, loss = 0;
  std::printf("  %s:", arch_name(c.arch));
  for (int s = 0; s < steps; s++) {
    model.zero_grad();
    loss = model.forward(tokens.data(), targets.data());
    ASSERT_TRUE(std::isfinite(loss)) << "step " << s;
    if (s == 0) first = loss;
    if (s % 25 == 0) std::printf(" %d:%.3f", s, loss);
    model.backward();
    opt.step(p, g, lr);
  }
  loss = model.forward(tokens.data(), targets.data());
  std::printf(" %d:%.4f\n", steps, loss);
  EXPECT_NEAR(first, std::log(float(c.vocab_size)), 0.2f) << "an untrained model should guess uniformly";
  EXPECT_LT(loss, threshold);
  // The trained parameters, run through the inference Transformer, predict the batch too.
  ModelWeights v = p.view();
  Transformer t(v);
  const float* logits = t.forward(tokens.data(), T, 0, true);  // the first sequence
  int right = 0;
  for (int i = 0; i < T; i++) {
    const float* row = logits + size_t(i) * c.vocab_size;
    right += int(std::max_element(row, row + c.vocab_size) - row) == targets[size_t(i)];
  }
  EXPECT_GE(right, T - 1) << "inference on the trained weights misses the memorised tokens";
}

}  // namespace

TEST(Overfit, LlamaMemorisesOneBatch) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = 32, c.hidden_dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2;
  c.vocab_size = c.padded_vocab = 64, c.seq_len = 16;
  overfit(c, 150, 1e-2f, 0.05f);
}

TEST(Overfit, Gpt2MemorisesOneBatch) {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.dim = 32, c.hidden_dim = 128, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4;
  c.vocab_size = 64, c.padded_vocab = 72, c.seq_len = 16;
  overfit(c, 150, 1e-2f, 0.05f);
}
