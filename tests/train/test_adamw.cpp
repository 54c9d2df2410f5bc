// AdamW against a naive double-precision implementation of the update written from the paper's
// formulas, over several steps: bias correction, decoupled weight decay on matrices only (or on
// everything), global-norm clipping; and bit-identical results for 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/cpu/kernels.h"
#include "train/loop/adamw.h"

using namespace orion;
using namespace orion::train;

namespace {
ModelConfig cfg() {
  ModelConfig c;
  c.arch = Arch::GPT2;  // has matrices and vectors (norms, biases)
  c.dim = 16, c.hidden_dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4;
  c.vocab_size = 29, c.padded_vocab = 32, c.seq_len = 8;
  return c;
}
void fill(ParamBuffer& p, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  for (const ParamInfo& t : p.tensors())
    for (size_t i = 0; i < t.numel; i++) p.data()[t.offset + i] = d(rng);
}

// The reference: plain loops in double.
struct NaiveAdamW {
  AdamWConfig c;
  std::vector<double> m, v;
  int t = 0;
  double step(std::vector<double>& p, const std::vector<double>& g, const std::vector<bool>& matrix, double lr) {
    if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0);
    double ss = 0;
    for (double x : g) ss += x * x;
    const double norm = std::sqrt(ss);
    const double s = c.clip_norm > 0 && norm > c.clip_norm ? c.clip_norm / norm : 1.0;
    t++;
    for (size_t i = 0; i < p.size(); i++) {
      const double gi = g[i] * s;
      m[i] = c.beta1 * m[i] + (1 - c.beta1) * gi;
      v[i] = c.beta2 * v[i] + (1 - c.beta2) * gi * gi;
      const double mh = m[i] / (1 - std::pow(double(c.beta1), t)), vh = v[i] / (1 - std::pow(double(c.beta2), t));
      const double wd = matrix[i] || c.decay_vectors ? c.weight_decay : 0.0;
      p[i] -= lr * (mh / (std::sqrt(vh) + c.eps) + wd * p[i]);
    }
    return norm;
  }
};

void compare(const AdamWConfig& ac, float grad_scale) {
  ModelConfig c = cfg();
  ParamBuffer p(c), g(c);
  fill(p, 1, 0.5f);
  AdamW opt(p, ac);
  NaiveAdamW ref{ac, {}, {}, 0};
  std::vector<double> pd(p.data(), p.data() + p.size());
  std::vector<bool> matrix(p.size(), false);
  for (const ParamInfo& t : p.tensors())
    for (size_t i = 0; i < t.numel; i++) matrix[t.offset + i] = t.matrix();
  for (int step = 0; step < 5; step++) {
    fill(g, 100 + step, grad_scale * float(1 + 2 * step));  // growing: clipping changes the mix
    std::vector<double> gd(g.data(), g.data() + g.size());
    const double lr = 1e-2 * (step + 1);  // a schedule of the caller's
    const float norm = opt.step(p, g, float(lr));
    const double rnorm = ref.step(pd, gd, matrix, lr);
    EXPECT_NEAR(norm, rnorm, 1e-5 * rnorm);
    double worst = 0;
    for (size_t i = 0; i < pd.size(); i++) worst = std::max(worst, std::abs(p.data()[i] - pd[i]));
    EXPECT_LT(worst, 2e-6) << "step " << step + 1;
  }
  EXPECT_EQ(opt.step_count(), 5);
}
}  // namespace

TEST(AdamW, MatchesNaivePlain) { compare({}, 1.0f); }  // llm.c's settings: no decay, no clipping

TEST(AdamW, MatchesNaiveWithDecayOnMatrices) {
  AdamWConfig c;
  c.weight_decay = 0.1f;
  compare(c, 1.0f);
}

TEST(AdamW, MatchesNaiveWithDecayOnEverything) {
  AdamWConfig c;
  c.weight_decay = 0.1f, c.decay_vectors = true, c.beta2 = 0.95f;
  compare(c, 1.0f);
}

TEST(AdamW, MatchesNaiveWithClipping) {
  AdamWConfig c;
  c.clip_norm = 1.0f;  // the gradient's norm is ~100: every step clips
  c.weight_decay = 0.05f;
  compare(c, 1.0f);
}

// Decay only where asked: with a zero gradient, a vector stays put and a matrix shrinks by lr·λ.
TEST(AdamW, DecayTouchesMatricesOnly) {
  ModelConfig c = cfg();
  ParamBuffer p(c), g(c);
  fill(p, 2, 1.0f);
  ParamBuffer before = p.clone();
  AdamWConfig ac;
  ac.weight_decay = 0.5f;
  AdamW opt(p, ac);
  opt.step(p, g, 0.1f);
  EXPECT_EQ(p.final_norm[3], before.final_norm[3]);
  EXPECT_EQ(p.layers[1].b1[2], before.layers[1].b1[2]);
  EXPECT_FLOAT_EQ(p.layers[1].w1[7], before.layers[1].w1[7] * (1 - 0.1f * 0.5f));
  EXPECT_FLOAT_EQ(p.tok_emb[5], before.tok_emb[5] * (1 - 0.1f * 0.5f));
}

TEST(AdamW, OneAndTwoThreadsBitIdentical) {
  ModelConfig c = cfg();
  c.dim = 128, c.hidden_dim = 512, c.vocab_size = 500, c.padded_vocab = 512;  // > one chunk per tensor
  auto run = [&](int threads) {
    cpu::set_num_threads(threads);
    ParamBuffer p(c), g(c);
    fill(p, 3, 0.5f);
    AdamWConfig ac;
    ac.clip_norm = 0.5f, ac.weight_decay = 0.1f;
    AdamW opt(p, ac);
    for (int s = 0; s < 3; s++) fill(g, 10 + s, 1.0f), opt.step(p, g, 1e-3f);
    return std::vector<float>(p.data(), p.data() + p.size());
  };
  auto a = run(1), b = run(2);
  cpu::set_num_threads(0);
  EXPECT_TRUE(a == b);
}
