// The whole training model (TrainModel + the CPU block runners), both families:
//   - its logits are Transformer::forward's (the inference reference) at every position;
//   - its loss is a plain cross-entropy of those logits (ignored targets skipped);
//   - every parameter tensor's gradient matches central finite differences of the loss on a sample
//     of its elements (fp32 model: larger step and looser tolerance than the per-layer checks in
//     double, test_layers.cpp);
//   - gradients and loss are bit-identical for 1 and 2 threads;
//   - backward(scale) accumulates, so micro-batches add up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "base/error.h"
#include "model/family/family.h"
#include "model/transformer.h"
#include "runtime/cpu/kernels.h"
#include "train/model/trainer_api.h"

using namespace orion;
using namespace orion::train;

namespace {

ModelConfig llama_cfg(bool tied, int NKV = 2) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = 16, c.hidden_dim = 40, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = NKV;
  c.vocab_size = c.padded_vocab = 29, c.seq_len = 8;
  c.tied_embeddings = tied;
  return c;
}
ModelConfig gpt2_cfg() {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.dim = 16, c.hidden_dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4;
  c.vocab_size = 29, c.padded_vocab = 32, c.seq_len = 8;
  return c;
}

// Parameters with some spread, so every gradient is far from 0 and a wrong term shows: matrices
// N(0, σ²), norm gains 1 + N(0, 0.2²), biases N(0, 0.2²).
ParamBuffer spread_params(const ModelConfig& c, uint64_t seed, float sigma = 0.3f) {
  ParamBuffer p(c);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (const ParamInfo& t : p.tensors()) {
    const bool gain = !t.matrix() && t.name.find("norm") != std::string::npos && t.name.back() != 'b';
    for (size_t i = 0; i < t.numel; i++)
      p.data()[t.offset + i] = t.matrix() ? sigma * d(rng) : gain ? 1.0f + 0.2f * d(rng) : 0.2f * d(rng);
  }
  return p;
}

std::vector<int> random_tokens(size_t n, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> t(n);
  for (int& x : t) x = int(rng() % uint64_t(V));
  return t;
}

}  // namespace

TEST(TrainModel, LogitsEqualInferenceForward) {
  for (const ModelConfig& c : {llama_cfg(true), llama_cfg(false, 1), llama_cfg(true, 4), gpt2_cfg()}) {
    SCOPED_TRACE(c.describe());
    ParamBuffer p = spread_params(c, 11, 0.2f);
    const int B = 3, T = c.seq_len;
    TrainModel m(p, nullptr, B, T);
    auto tokens = random_tokens(size_t(B) * T, c.vocab_size, 5);
    m.forward(tokens.data(), nullptr);
    ModelWeights v = p.view();
    float worst = 0;
    for (int b = 0; b < B; b++) {
      Transformer ref(v);
      const float* l = ref.forward(tokens.data() + size_t(b) * T, T, 0, /*all_logits=*/true);  // [T, V]
      for (int i = 0; i < T * c.vocab_size; i++)
        worst = std::max(worst, std::abs(l[i] - m.logits()[size_t(b) * T * c.vocab_size + i]));
    }
    EXPECT_LT(worst, 1e-5f);
    std::printf("  %s: max |logit − inference logit| = %.2e\n", arch_name(c.arch), worst);
  }
}

TEST(TrainModel, LossIsCrossEntropyOfLogits) {
  for (const ModelConfig& c : {llama_cfg(true), gpt2_cfg()}) {
    ParamBuffer p = spread_params(c, 12);
    const int B = 2, T = 8, N = B * T, V = c.vocab_size;
    TrainModel m(p, nullptr, B, T);
    auto tokens = random_tokens(N, V, 6), targets = random_tokens(N, V, 7);
    targets[3] = targets[9] = -1;  // no loss at these positions
    const float loss = m.forward(tokens.data(), targets.data());
    double sum = 0;
    int count = 0;
    for (int n = 0; n < N; n++) {
      if (targets[size_t(n)] < 0) continue;
      const float* l = m.logits() + size_t(n) * V;
      double z = 0;
      for (int v = 0; v < V; v++) z += std::exp(double(l[v]));
      sum += -std::log(std::exp(double(l[targets[size_t(n)]])) / z);
      count++;
    }
    EXPECT_EQ(m.positions_counted(), 14);
    EXPECT_NEAR(loss, sum / count, 1e-5 * sum / count) << arch_name(c.arch);
    // no targets: loss 0 and logits unchanged
    std::vector<float> keep(m.logits(), m.logits() + size_t(N) * V);
    EXPECT_EQ(m.forward(tokens.data(), nullptr), 0.0f);
    EXPECT_EQ(std::vector<float>(m.logits(), m.logits() + size_t(N) * V), keep);
  }
}

TEST(TrainModel, RejectsBadInput) {
  ParamBuffer p(llama_cfg(true));
  EXPECT_THROW(TrainModel(p, nullptr, 1, 9), Error);  // T beyond seq_len
  TrainModel m(p, nullptr, 2, 4);
  std::vector<int> tokens(8, 1), targets(8, 1);
  EXPECT_THROW(m.forward(tokens.data(), targets.data(), 3, 4), Error);
  tokens[5] = 29;
  EXPECT_THROW(m.forward(tokens.data(), targets.data()), Error);
  tokens[5] = 1, targets[2] = 40;
  EXPECT_THROW(m.forward(tokens.data(), targets.data()), Error);
}

// Central differences of the fp32 loss for a sample of elements of every tensor. The loss is
// ~3 and its float rounding is ~1e-7 relative, so h = 1e-2 keeps the noise of the quotient near
// 1e-5 while the truncation error (∝ h²) stays small; each element's error is measured against
// the size of its tensor's gradient.
namespace {
// Central differences of the loss in a few elements of every tensor (and its largest-gradient one)
// against the backward's gradient.
void expect_gradients_match_finite_differences(const ModelConfig& c) {
  SCOPED_TRACE(c.describe());
  ParamBuffer p = spread_params(c, 13);
  ParamBuffer g(c);
  const int B = 2, T = 6, N = B * T;
  TrainModel m(p, &g, B, T);
  auto tokens = random_tokens(N, c.vocab_size, 8), targets = random_tokens(N, c.vocab_size, 9);
  targets[4] = -1;
  m.zero_grad();
  m.forward(tokens.data(), targets.data());
  m.backward();
  std::mt19937_64 rng(3);
  const float h = 1e-2f;
  double worst_all = 0;
  for (const ParamInfo& t : p.tensors()) {
    // the sample: a few random elements, plus the largest-gradient one
    std::vector<size_t> idx;
    size_t big = 0;
    for (size_t i = 0; i < t.numel; i++)
      if (std::abs(g.data()[t.offset + i]) > std::abs(g.data()[t.offset + big])) big = i;
    idx.push_back(big);
    for (int k = 0; k < 6; k++) idx.push_back(size_t(rng() % t.numel));
    double max_err = 0, max_grad = 0;
    for (size_t i : idx) {
      float& w = p.data()[t.offset + i];
      const float keep = w;
      w = keep + h;
      const double lp = m.forward(tokens.data(), targets.data());
      w = keep - h;
      const double lm = m.forward(tokens.data(), targets.data());
      w = keep;
      const double numeric = (lp - lm) / (2.0 * h);
      max_err = std::max(max_err, std::abs(numeric - g.data()[t.offset + i]));
      max_grad = std::max(max_grad, std::abs(numeric));
    }
    const bool rotated = model_family(c.arch).anatomy().positions == Positions::Rope;
    if (!rotated && t.name.size() > 3 && t.name.compare(t.name.size() - 3, 3, ".bk") == 0) {
      // The key bias adds q·bk to every score of a row, which softmax ignores: its true gradient
      // is exactly 0, and both the backward and the differences must say so. (RoPE turns bk by
      // each key's position, and then it matters.)
      EXPECT_LT(max_grad, 1e-4) << t.name;
      EXPECT_LT(max_err, 1e-4) << t.name;
      continue;
    }
    const double rel = max_err / std::max(max_grad, 1e-12);
    worst_all = std::max(worst_all, rel);
    EXPECT_GT(max_grad, 1e-4) << t.name << ": vacuous check";
    EXPECT_LT(rel, 5e-3) << t.name << ": max err " << max_err << ", max grad " << max_grad;
  }
  std::printf("  %s%s: worst relative error over all tensors %.2e\n", arch_name(c.arch),
              c.tied_embeddings ? " tied" : " untied", worst_all);
}
}  // namespace

TEST(TrainModel, ParameterGradientsMatchFiniteDifferences) {
  for (const ModelConfig& c : {llama_cfg(false), llama_cfg(true, 1), gpt2_cfg()})
    expect_gradients_match_finite_differences(c);
}

// Llama's relatives: every parameter's gradient, the q/k/v biases and the q/k norm gains included,
// through llama3 RoPE scaling, HS ≠ C/NH and a sliding window shorter than the sequence.
TEST(TrainModel, LlamaRelativesParameterGradientsMatchFiniteDifferences) {
  ModelConfig llama3 = llama_cfg(false);
  llama3.rope_scaling = {RopeScaling::Kind::Llama3, 8, 1, 4, 32};
  ModelConfig qwen2 = llama_cfg(true);
  qwen2.arch = Arch::Qwen2;
  ModelConfig qwen3 = llama_cfg(true);
  qwen3.arch = Arch::Qwen3, qwen3.head_size = 8;
  ModelConfig mistral = llama_cfg(false);
  mistral.arch = Arch::Mistral, mistral.sliding_window = 3;
  for (const ModelConfig& c : {llama3, qwen2, qwen3, mistral}) expect_gradients_match_finite_differences(c);
}

// Two micro-batches with backward(0.5) each = the mean of their gradients.
TEST(TrainModel, BackwardAccumulates) {
  ModelConfig c = gpt2_cfg();
  ParamBuffer p = spread_params(c, 14);
  ParamBuffer g1(c), g2(c), gsum(c);
  const int B = 2, T = 8, N = B * T;
  auto tok_a = random_tokens(N, c.vocab_size, 1), tok_b = random_tokens(N, c.vocab_size, 2);
  auto tgt_a = random_tokens(N, c.vocab_size, 3), tgt_b = random_tokens(N, c.vocab_size, 4);
  TrainModel m1(p, &g1, B, T), m2(p, &g2, B, T), ms(p, &gsum, B, T);
  m1.zero_grad(), m2.zero_grad(), ms.zero_grad();
  m1.forward(tok_a.data(), tgt_a.data()), m1.backward();
  m2.forward(tok_b.data(), tgt_b.data()), m2.backward();
  ms.forward(tok_a.data(), tgt_a.data()), ms.backward(0.5f);
  ms.forward(tok_b.data(), tgt_b.data()), ms.backward(0.5f);
  double worst = 0, norm = 0;
  for (size_t i = 0; i < p.size(); i++) {
    worst = std::max(worst, double(std::abs(gsum.data()[i] - 0.5f * (g1.data()[i] + g2.data()[i]))));
    norm = std::max(norm, double(std::abs(gsum.data()[i])));
  }
  EXPECT_GT(norm, 1e-3);
  EXPECT_LT(worst, 1e-6 * norm);
}

// Large enough that every layer and matmul really splits over threads.
TEST(TrainModel, OneAndTwoThreadsBitIdentical) {
  for (Arch arch : {Arch::Llama, Arch::GPT2}) {
    ModelConfig c = arch == Arch::Llama ? llama_cfg(true) : gpt2_cfg();
    c.dim = 128, c.hidden_dim = arch == Arch::Llama ? 320 : 512, c.seq_len = 64, c.vocab_size = 300;
    c.padded_vocab = arch == Arch::Llama ? 300 : 320;
    ParamBuffer p = spread_params(c, 15, 0.05f);
    const int B = 2, T = 64, N = B * T;
    auto tokens = random_tokens(N, c.vocab_size, 10), targets = random_tokens(N, c.vocab_size, 11);
    auto run = [&](int threads, float* loss) {
      cpu::set_num_threads(threads);
      ParamBuffer g(c);
      TrainModel m(p, &g, B, T);
      m.zero_grad();
      *loss = m.forward(tokens.data(), targets.data());
      m.backward();
      return std::vector<float>(g.data(), g.data() + g.size());
    };
    float l1, l2;
    auto g1 = run(1, &l1), g2 = run(2, &l2);
    cpu::set_num_threads(0);
    EXPECT_EQ(l1, l2) << arch_name(arch);
    EXPECT_TRUE(g1 == g2) << arch_name(arch) << ": gradients differ between 1 and 2 threads";
  }
}

// A backend takes over the blocks through set_blocks(): here a runner that delegates to the CPU
// one and records the calls. Same loss and gradients, forward in layer order, backward in reverse,
// each backward given the same x as its forward.
TEST(TrainModel, BlockRunnerCanBeReplaced) {
  struct Recording final : BlockRunner {
    std::unique_ptr<BlockRunner> inner;
    std::vector<std::pair<char, int>> calls;
    std::vector<const float*> inputs;
    int updates = 0;
    bool same_x = true;
    const char* name() const override { return "recording"; }
    void forward_block(int l, const float* x, float* y, int B, int T) override {
      calls.push_back({'f', l});
      inputs.resize(size_t(l) + 1);
      inputs[size_t(l)] = x;
      inner->forward_block(l, x, y, B, T);
    }
    void backward_block(int l, const float* x, const float* dy, float* dx, int B, int T) override {
      calls.push_back({'b', l});
      same_x = same_x && inputs[size_t(l)] == x;
      inner->backward_block(l, x, dy, dx, B, T);
    }
    void weights_updated() override { updates++; }
  };
  ModelConfig c = llama_cfg(true);
  c.n_layers = 3;
  ParamBuffer p = spread_params(c, 16);
  ParamBuffer g1(c), g2(c);
  const int B = 2, T = 8, N = B * T;
  auto tokens = random_tokens(N, c.vocab_size, 12), targets = random_tokens(N, c.vocab_size, 13);
  TrainModel plain(p, &g1, B, T), swapped(p, &g2, B, T);
  auto rec = std::make_unique<Recording>();
  rec->inner = make_cpu_blocks(p, &g2, B, T);
  Recording* r = rec.get();
  swapped.set_blocks(std::move(rec));
  EXPECT_STREQ(swapped.blocks().name(), "recording");
  plain.zero_grad(), swapped.zero_grad();
  EXPECT_EQ(plain.forward(tokens.data(), targets.data()), swapped.forward(tokens.data(), targets.data()));
  plain.backward(), swapped.backward();
  swapped.weights_updated();
  EXPECT_TRUE(std::equal(g1.data(), g1.data() + g1.size(), g2.data()));
  std::vector<std::pair<char, int>> expect = {{'f', 0}, {'f', 1}, {'f', 2}, {'b', 2}, {'b', 1}, {'b', 0}};
  EXPECT_EQ(r->calls, expect);
  EXPECT_TRUE(r->same_x);
  EXPECT_EQ(r->updates, 1);
}

// Gradient checkpointing: the recomputed blocks' activations are rebuilt from their inputs before
// their backward, so the loss and every gradient are bit-identical to keeping all activations —
// for each family, with every block recomputed, with one in 2 and one in 3 (5 layers: the shared set
// is rebuilt out of order), and over two accumulated micro-batches.
TEST(TrainModel, ActivationCheckpointingGradientsAreBitIdentical) {
  ModelConfig qwen3 = llama_cfg(true);
  qwen3.arch = Arch::Qwen3, qwen3.head_size = 8;
  ModelConfig mistral = llama_cfg(false);
  mistral.arch = Arch::Mistral, mistral.sliding_window = 3;
  for (ModelConfig c : {llama_cfg(false), qwen3, mistral, gpt2_cfg()}) {
    c.n_layers = 5;
    ParamBuffer p = spread_params(c, 16);
    const int B = 2, T = 8, N = B * T;
    auto tok_a = random_tokens(N, c.vocab_size, 1), tok_b = random_tokens(N, c.vocab_size, 2);
    auto tgt_a = random_tokens(N, c.vocab_size, 3), tgt_b = random_tokens(N, c.vocab_size, 4);
    auto run = [&](const std::string& mode, float* loss) {
      ParamBuffer g(c);
      TrainModel m(p, &g, B, T, ActivationCheckpointing::parse(mode));
      m.zero_grad();
      *loss = m.forward(tok_a.data(), tgt_a.data());
      m.backward(0.5f);
      *loss += m.forward(tok_b.data(), tgt_b.data());
      m.backward(0.5f);
      return std::vector<float>(g.data(), g.data() + g.size());
    };
    float l0;
    const std::vector<float> g0 = run("none", &l0);
    for (const char* mode : {"blocks", "every-2", "every-3"}) {
      float l;
      EXPECT_TRUE(run(mode, &l) == g0) << arch_name(c.arch) << " " << mode << ": gradients differ";
      EXPECT_EQ(l, l0) << arch_name(c.arch) << " " << mode;
    }
  }
}

// The activation sets a runner holds: one per kept block, one shared by the recomputed blocks.
TEST(TrainModel, ActivationCheckpointingSlots) {
  EXPECT_EQ(ActivationCheckpointing::parse("none").slots(12), 12);
  EXPECT_EQ(ActivationCheckpointing::parse("blocks").slots(12), 1);
  const ActivationCheckpointing every3 = ActivationCheckpointing::parse("every-3");
  EXPECT_EQ(every3.name(), "every-3");
  EXPECT_EQ(every3.slots(7), 7 - 3 + 1);  // blocks 0, 3, 6 recomputed
  std::vector<int> kept;
  for (int l = 0; l < 7; l++) {
    EXPECT_EQ(every3.recomputed(l), l % 3 == 0) << l;
    if (every3.recomputed(l)) EXPECT_EQ(every3.slot(l, 7), every3.slots(7) - 1) << l;
    else kept.push_back(every3.slot(l, 7));
  }
  EXPECT_EQ(kept, (std::vector<int>{0, 1, 2, 3}));  // distinct, and none is the shared set
  for (const char* bad : {"every-0", "every-", "every-2x", "some", ""})
    EXPECT_THROW(ActivationCheckpointing::parse(bad), Error) << bad;
}
