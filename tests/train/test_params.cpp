// train/params: the one-buffer parameter layout, conversion from loaded weights (f16/bf16 → fp32),
// the zero-copy ModelWeights view the inference Transformer runs on, and export for saving.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "model/transformer.h"
#include "train/model/params.h"

using namespace orion;
using namespace orion::train;

namespace {
ModelConfig tiny(Arch arch, bool tied) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 16, c.hidden_dim = arch == Arch::GPT2 ? 64 : 40, c.n_layers = 2, c.n_heads = 4;
  c.n_kv_heads = arch == Arch::GPT2 ? 4 : 2;
  c.vocab_size = 37, c.padded_vocab = arch == Arch::GPT2 ? 40 : 37, c.seq_len = 8;
  c.tied_embeddings = tied;
  return c;
}
}  // namespace

TEST(TrainParams, LayoutCountsEveryParameterOnce) {
  for (const char* name : {"stories260k", "stories15m", "gpt2-tiny"}) {
    ModelConfig c = config_preset(name);
    ParamBuffer p(c);
    EXPECT_EQ(p.num_params(), c.num_params()) << name;
    size_t end = 0;
    for (const ParamInfo& t : p.tensors()) {
      EXPECT_EQ(t.offset % 16, 0u) << t.name;  // 64-byte aligned
      EXPECT_GE(t.offset, end) << t.name << " overlaps the previous tensor";
      end = t.offset + t.numel;
    }
    EXPECT_LE(end, p.size());
    EXPECT_EQ(p.classifier, p.tok_emb) << "tied classifier shares the embedding";
  }
  ParamBuffer u(tiny(Arch::Llama, false));
  EXPECT_NE(u.classifier, u.tok_emb);
  EXPECT_EQ(u.num_params(), u.config().num_params());
  EXPECT_EQ(u.tensor("classifier").shape, (std::vector<int64_t>{37, 16}));
  EXPECT_EQ(u.layers[1].w3, u.data() + u.tensor("layers.1.w3").offset);
  EXPECT_EQ(u.layers[0].bq, nullptr);  // Llama has no biases
  EXPECT_THROW(u.tensor("layers.0.nope"), Error);
}

TEST(TrainParams, FromWeightsViewAndExport) {
  for (Arch arch : {Arch::Llama, Arch::GPT2})
    for (bool tied : {true, false}) {
      SCOPED_TRACE(std::string(arch_name(arch)) + (tied ? " tied" : " untied"));
      ModelConfig c = tiny(arch, tied);
      ModelWeights w = random_weights(c, 7);
      ParamBuffer p = ParamBuffer::from_weights(w);
      // every tensor copied exactly
      auto a = w.named_tensors();
      ModelWeights v = p.view();
      v.validate("view");
      auto b = v.named_tensors();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); i++) {
        EXPECT_EQ(a[i].first, b[i].first);
        EXPECT_EQ(a[i].second->shape, b[i].second->shape) << a[i].first;
        EXPECT_EQ(0, std::memcmp(a[i].second->data, b[i].second->data, a[i].second->nbytes())) << a[i].first;
      }
      // the view is the buffer itself: a change to the parameters changes the inference logits
      int tokens[4] = {1, 5, 9, 2};
      Transformer t1(v), t2(v);
      const float* r1 = t1.forward(tokens, 4, 0);
      std::vector<float> before(r1, r1 + c.vocab_size);
      p.layers[0].wq[3] += 0.5f;
      p.final_norm[1] += 0.5f;
      const float* r2 = t2.forward(tokens, 4, 0);
      std::vector<float> after(r2, r2 + c.vocab_size);
      EXPECT_NE(before, after);
      // export: an independent, valid copy
      ModelWeights e = p.to_weights();
      e.validate("export");
      p.final_norm[1] -= 0.5f;
      EXPECT_EQ(e.final_norm.f32()[1], p.final_norm[1] + 0.5f);
      ModelWeights h = p.to_weights(DType::F16);
      h.validate("export f16");
      EXPECT_EQ(h.layers[0].wq.dtype, DType::F16);
      EXPECT_EQ(h.final_norm.dtype, DType::F32);
      if (tied) {
        EXPECT_EQ(h.classifier.data, h.tok_emb.data);
      }
    }
}

TEST(TrainParams, FineTuneFromHalfPrecision) {
  for (DType dt : {DType::F16, DType::BF16}) {
    ModelWeights w = random_weights(tiny(Arch::Llama, true), 3, dt);
    ParamBuffer p = ParamBuffer::from_weights(w);
    const ParamInfo& wq = p.tensor("layers.1.wq");
    std::vector<float> expect(wq.numel);
    convert_dtype(w.layers[1].wq.data, dt, expect.data(), DType::F32, wq.numel);
    EXPECT_EQ(0, std::memcmp(expect.data(), p.data() + wq.offset, wq.numel * 4)) << dtype_name(dt);
    // the fp32 view computes what the half-precision model computes, up to the kernels' rounding
    int tokens[3] = {4, 2, 30};
    Transformer half(w);
    const float* a = half.forward(tokens, 3, 0);
    std::vector<float> la(a, a + 37);
    ModelWeights v = p.view();
    Transformer full(v);
    const float* b = full.forward(tokens, 3, 0);
    for (int i = 0; i < 37; i++) EXPECT_NEAR(la[size_t(i)], b[i], 1e-4f);
  }
}

TEST(TrainParams, LoadRejectsAnotherShape) {
  ParamBuffer p(tiny(Arch::Llama, true));
  ModelConfig other = tiny(Arch::Llama, true);
  other.hidden_dim = 48;
  EXPECT_THROW(p.load(random_weights(other, 1)), Error);
  EXPECT_THROW(p.load(random_weights(tiny(Arch::Llama, false), 1)), Error);
}

TEST(TrainParams, CloneIsDeep) {
  ParamBuffer p = ParamBuffer::from_weights(random_weights(tiny(Arch::GPT2, true), 2));
  ParamBuffer q = p.clone();
  ASSERT_EQ(p.size(), q.size());
  EXPECT_EQ(0, std::memcmp(p.data(), q.data(), p.size() * 4));
  q.pos_emb[0] += 1.0f;
  EXPECT_NE(p.pos_emb[0], q.pos_emb[0]);
  EXPECT_EQ(q.classifier, q.tok_emb);
  p.zero();
  EXPECT_EQ(p.layers[1].w2[5], 0.0f);
}

// The reference init: std 0.02, residual projections 0.02/√(2L) (GPT-2: wo, w2; llama2.c: wo, w3),
// gains 1, biases 0, deterministic in the seed.
TEST(TrainParams, ReferenceInit) {
  for (Arch arch : {Arch::Llama, Arch::GPT2}) {
    ModelConfig c = tiny(arch, true);
    c.dim = 64, c.hidden_dim = 128, c.n_layers = 8;
    ParamBuffer p(c), q(c);
    init_params(p, 5);
    init_params(q, 5);
    EXPECT_EQ(0, std::memcmp(p.data(), q.data(), p.size() * 4));
    auto stdev = [&](const std::string& name) {
      const ParamInfo& t = p.tensor(name);
      double s = 0;
      for (size_t i = 0; i < t.numel; i++) s += double(p.data()[t.offset + i]) * p.data()[t.offset + i];
      return std::sqrt(s / double(t.numel));
    };
    const double small = 0.02 / std::sqrt(16.0);
    EXPECT_NEAR(stdev("tok_emb"), 0.02, 0.002);
    EXPECT_NEAR(stdev("layers.3.wq"), 0.02, 0.002);
    EXPECT_NEAR(stdev("layers.3.wo"), small, small * 0.1);
    EXPECT_NEAR(stdev("layers.3.w1"), 0.02, 0.002);
    EXPECT_NEAR(stdev(arch == Arch::GPT2 ? "layers.3.w2" : "layers.3.w3"), small, small * 0.1);
    EXPECT_NEAR(stdev(arch == Arch::GPT2 ? "layers.3.w1" : "layers.3.w2"), 0.02, 0.002);
    EXPECT_EQ(p.layers[2].ffn_norm[7], 1.0f);
    EXPECT_EQ(p.final_norm[0], 1.0f);
    if (arch == Arch::GPT2) {
      EXPECT_EQ(p.layers[1].b1[3], 0.0f);
      EXPECT_EQ(p.final_norm_b[2], 0.0f);
    }
    p.view().validate("init");
  }
}

// Every Llama relative's config lays out (the CPU blocks train all their features), counting each
// parameter once.
TEST(TrainParams, LaysOutEveryLlamaRelative) {
  ModelConfig scaled = tiny(Arch::Llama, false);
  scaled.rope_scaling = {RopeScaling::Kind::Llama3, 8, 1, 4, 32};
  ModelConfig windowed = tiny(Arch::Mistral, true);
  windowed.sliding_window = 4;
  for (const ModelConfig& c : {tiny(Arch::Qwen2, true), tiny(Arch::Qwen3, false), scaled, windowed}) {
    const ParamBuffer p(c);
    EXPECT_EQ(p.num_params(), c.num_params()) << c.describe();
  }
}

// The relatives' extra tensors: Qwen2's q/k/v biases and Qwen3's per-head norm gains [HS] (HS ≠ C/NH
// here), each a range of the buffer bound to the layer's pointers.
TEST(TrainParams, LaysOutTheLlamaRelativesExtraTensors) {
  const ParamBuffer qwen2(tiny(Arch::Qwen2, true));
  EXPECT_EQ(qwen2.tensor("layers.1.bq").shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(qwen2.tensor("layers.1.bk").shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(qwen2.tensor("layers.1.bv").shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(qwen2.layers[1].bk, qwen2.data() + qwen2.tensor("layers.1.bk").offset);
  EXPECT_EQ(qwen2.layers[1].bo, nullptr);
  EXPECT_EQ(qwen2.layers[1].q_norm, nullptr);
  ModelConfig c = tiny(Arch::Qwen3, true);
  c.head_size = 6;
  const ParamBuffer qwen3(c);
  EXPECT_EQ(qwen3.tensor("layers.0.q_norm").shape, (std::vector<int64_t>{6}));
  EXPECT_EQ(qwen3.tensor("layers.0.wq").shape, (std::vector<int64_t>{24, 16}));
  EXPECT_EQ(qwen3.tensor("layers.0.wk").shape, (std::vector<int64_t>{12, 16}));
  EXPECT_EQ(qwen3.layers[0].k_norm, qwen3.data() + qwen3.tensor("layers.0.k_norm").offset);
  EXPECT_EQ(qwen3.layers[0].bq, nullptr);
  EXPECT_EQ(qwen3.num_params(), c.num_params());
  qwen3.view().validate("qwen3 view");
}
