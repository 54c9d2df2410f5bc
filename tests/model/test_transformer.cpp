// The CPU transformer against a naive reference written independently here: plain loops, double
// accumulation, no KV cache (attention recomputed over the whole prefix), one token at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "base/error.h"
#include "model/transformer.h"
#include "runtime/cpu/kernels.h"
#include "transformer_test_util.h"

namespace orion {
namespace {

using Vec = std::vector<double>;

// Random weights with random (not unit / zero) norms and biases, so every parameter matters.
ModelWeights test_weights(const ModelConfig& c, uint64_t seed, DType dt = DType::F32) {
  ModelWeights w = random_weights(c, seed, dt);
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (auto& [name, t] : w.named_tensors_mut()) {
    if (t->shape.size() != 1) continue;
    void* p;
    bool is_scale = name.find("norm") != std::string::npos && name.back() != 'b';
    Tensor fresh = w.alloc_tensor(t->shape, DType::F32, &p);
    for (int64_t i = 0; i < t->numel(); i++) static_cast<float*>(p)[i] = (is_scale ? 1.0f : 0.0f) + u(rng);
    *t = fresh;
  }
  return w;
}

double at(const Tensor& t, int64_t r, int64_t c) { return load_as_f32(t.data, t.dtype, size_t(r * t.shape[1] + c)); }
double at(const Tensor& t, int64_t i) { return load_as_f32(t.data, t.dtype, size_t(i)); }

// y = W·x (+ b)
Vec linear(const Tensor& W, const Vec& x, const Tensor* b = nullptr) {
  Vec y(size_t(W.shape[0]));
  for (int64_t r = 0; r < W.shape[0]; r++) {
    double s = b && !b->empty() ? at(*b, r) : 0.0;
    for (int64_t k = 0; k < W.shape[1]; k++) s += at(W, r, k) * x[size_t(k)];
    y[size_t(r)] = s;
  }
  return y;
}

Vec norm(const ModelConfig& c, const Vec& x, const Tensor& w, const Tensor& b) {
  size_t n = x.size();
  Vec y(n);
  if (c.arch == Arch::Llama) {
    double ss = 0;
    for (double v : x) ss += v * v;
    double r = 1.0 / std::sqrt(ss / n + c.norm_eps);
    for (size_t i = 0; i < n; i++) y[i] = x[i] * r * at(w, int64_t(i));
  } else {
    double mean = 0, var = 0;
    for (double v : x) mean += v;
    mean /= n;
    for (double v : x) var += (v - mean) * (v - mean);
    double r = 1.0 / std::sqrt(var / n + c.norm_eps);
    for (size_t i = 0; i < n; i++) y[i] = (x[i] - mean) * r * at(w, int64_t(i)) + at(b, int64_t(i));
  }
  return y;
}

void rope_ref(Vec& v, int heads, int hs, int pos, double theta) {
  for (int h = 0; h < heads; h++)
    for (int i = 0; i < hs; i += 2) {
      double ang = pos / std::pow(theta, double(i) / hs);
      double a = v[size_t(h * hs + i)], b = v[size_t(h * hs + i + 1)];
      v[size_t(h * hs + i)] = a * std::cos(ang) - b * std::sin(ang);
      v[size_t(h * hs + i + 1)] = a * std::sin(ang) + b * std::cos(ang);
    }
}

// Logits [T][V] of every position of `tokens`.
std::vector<Vec> reference_logits(const ModelWeights& w, const std::vector<int>& tokens) {
  const ModelConfig& c = w.config;
  const int T = int(tokens.size()), C = c.dim, HS = c.head_dim(), NH = c.n_heads, NKV = c.n_kv_heads;
  bool gpt2 = c.arch == Arch::GPT2;
  const size_t uT = tokens.size();
  std::vector<Vec> x(uT, Vec(static_cast<size_t>(C)));
  for (int t = 0; t < T; t++)
    for (int i = 0; i < C; i++)
      x[size_t(t)][size_t(i)] = at(w.tok_emb, tokens[size_t(t)], i) + (gpt2 ? at(w.pos_emb, t, i) : 0.0);
  for (const LayerWeights& l : w.layers) {
    std::vector<Vec> q(uT), k(uT), v(uT);
    for (int t = 0; t < T; t++) {
      Vec xb = norm(c, x[size_t(t)], l.attn_norm, l.attn_norm_b);
      q[size_t(t)] = linear(l.wq, xb, &l.bq), k[size_t(t)] = linear(l.wk, xb, &l.bk), v[size_t(t)] = linear(l.wv, xb, &l.bv);
      if (!gpt2) rope_ref(q[size_t(t)], NH, HS, t, c.rope_theta), rope_ref(k[size_t(t)], NKV, HS, t, c.rope_theta);
    }
    for (int t = 0; t < T; t++) {
      Vec att(size_t(NH * HS), 0.0);
      for (int h = 0; h < NH; h++) {
        int kh = h / (NH / NKV);
        Vec s(size_t(t + 1));
        double mx = -1e300, sum = 0;
        for (int p = 0; p <= t; p++) {
          double d = 0;
          for (int i = 0; i < HS; i++) d += q[size_t(t)][size_t(h * HS + i)] * k[size_t(p)][size_t(kh * HS + i)];
          s[size_t(p)] = d / std::sqrt(double(HS));
          mx = std::max(mx, s[size_t(p)]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int p = 0; p <= t; p++)
          for (int i = 0; i < HS; i++) att[size_t(h * HS + i)] += s[size_t(p)] / sum * v[size_t(p)][size_t(kh * HS + i)];
      }
      Vec o = linear(l.wo, att, &l.bo);
      for (int i = 0; i < C; i++) x[size_t(t)][size_t(i)] += o[size_t(i)];
      Vec xb = norm(c, x[size_t(t)], l.ffn_norm, l.ffn_norm_b);
      Vec h1 = linear(l.w1, xb, &l.b1);
      if (gpt2) {
        for (double& e : h1) e = 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e)));
      } else {
        Vec h3 = linear(l.w3, xb);
        for (size_t i = 0; i < h1.size(); i++) h1[i] = h1[i] / (1 + std::exp(-h1[i])) * h3[i];
      }
      Vec f = linear(l.w2, h1, &l.b2);
      for (int i = 0; i < C; i++) x[size_t(t)][size_t(i)] += f[size_t(i)];
    }
  }
  std::vector<Vec> logits;
  for (int t = 0; t < T; t++) {
    Vec xf = norm(c, x[size_t(t)], w.final_norm, w.final_norm_b);
    Vec lg = linear(w.classifier, xf);
    lg.resize(size_t(c.vocab_size));
    logits.push_back(lg);
  }
  return logits;
}

ModelConfig tiny_llama(int nkv = 2, bool tied = true) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = 64, c.hidden_dim = 96, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = nkv;
  c.vocab_size = c.padded_vocab = 97, c.seq_len = 160, c.tied_embeddings = tied;
  return c;
}
ModelConfig tiny_gpt2() {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.dim = 48, c.hidden_dim = 192, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4;
  c.vocab_size = 101, c.padded_vocab = 128, c.seq_len = 160;
  return c;
}

std::vector<int> some_tokens(int n, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> t(static_cast<size_t>(n));
  for (int& e : t) e = int(rng() % uint64_t(V));
  return t;
}

double max_diff_all(Transformer& tf, const std::vector<Vec>& ref, const std::vector<int>& toks) {
  const float* lg = tf.forward(toks.data(), int(toks.size()), 0, true);
  double md = 0;
  int V = tf.vocab_size();
  for (size_t t = 0; t < toks.size(); t++)
    for (int i = 0; i < V; i++) md = std::max(md, std::abs(lg[t * size_t(V) + size_t(i)] - ref[t][size_t(i)]));
  return md;
}

void check_against_reference(const ModelConfig& c, int T, uint64_t seed) {
  ModelWeights w = test_weights(c, seed);
  w.validate("test");
  auto toks = some_tokens(T, c.vocab_size, seed);
  auto ref = reference_logits(w, toks);
  Transformer tf(w);
  EXPECT_LE(max_diff_all(tf, ref, toks), 1e-4);
  // Token-by-token decode gives the same logits as prefill.
  Transformer dec(w);
  double md = 0;
  for (int t = 0; t < T; t++) {
    const float* lg = dec.forward(&toks[size_t(t)], 1, t);
    for (int i = 0; i < c.vocab_size; i++) md = std::max(md, std::abs(lg[i] - ref[size_t(t)][size_t(i)]));
  }
  EXPECT_LE(md, 1e-4);
}

TEST(Transformer, LlamaGqaMatchesNaiveReference) { check_against_reference(tiny_llama(2), 20, 1); }
TEST(Transformer, LlamaUntiedMhaMatchesNaiveReference) { check_against_reference(tiny_llama(4, false), 9, 2); }
TEST(Transformer, Gpt2MatchesNaiveReference) { check_against_reference(tiny_gpt2(), 20, 3); }
// Longer than one prefill chunk (Transformer::kChunk).
TEST(Transformer, LongPrefillCrossesChunks) { check_against_reference(tiny_llama(2), 150, 4); }

TEST(Transformer, ReducedPrecisionWeightsStayClose) {
  // f16 / bf16 weights: compare with the reference run on the same (rounded) weights.
  for (DType dt : {DType::F16, DType::BF16}) {
    ModelWeights w = test_weights(tiny_gpt2(), 5);
    w.convert_matrices(dt);
    auto toks = some_tokens(12, w.config.vocab_size, 5);
    auto ref = reference_logits(w, toks);
    Transformer tf(w);
    EXPECT_LE(max_diff_all(tf, ref, toks), 1e-4) << dtype_name(dt);
  }
}

TEST(Transformer, RejectsBadTokensAndOverlongSequences) {
  ModelWeights w = test_weights(tiny_llama(), 6);
  Transformer tf(w, 8);
  int bad = 97;
  EXPECT_THROW(tf.forward(&bad, 1, 0), Error);
  auto toks = some_tokens(9, 97, 6);
  EXPECT_THROW(tf.forward(toks.data(), 9, 0), Error);
}

TEST(Transformer, SameLogitsForOneAndTwoThreads) {
  ModelWeights w = test_weights(tiny_llama(), 7);
  auto toks = some_tokens(40, 97, 7);
  std::vector<float> a, b;
  for (int threads : {1, 2}) {
    cpu::set_num_threads(threads);
    Transformer tf(w);
    const float* lg = tf.forward(toks.data(), 40, 0, true);
    (threads == 1 ? a : b).assign(lg, lg + 40 * 97);
  }
  cpu::set_num_threads(0);
  EXPECT_EQ(a, b);
}

// A decode step (one parallel region per token, family/decode_step.cpp) gives the same logits, bit
// for bit, as prefill of the whole sequence, for both block kinds (Llama: RMSNorm, RoPE, SwiGLU;
// GPT-2: LayerNorm, learned positions, GELU, biases everywhere, a padded classifier), every weight
// dtype and thread count (3 threads split the row spaces unevenly, and cannot share GPT-2's 4 kv
// heads out evenly).
TEST(Transformer, DecodeEqualsPrefillBitForBit) {
  ModelConfig gpt2 = tiny_gpt2();
  gpt2.dim = 64;  // rows in whole q8_0 blocks
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0})
    for (const ModelConfig& c : {tiny_llama(2), tiny_llama(4, false), gpt2}) {
      ModelWeights w = test_weights(c, 8);
      w.convert_matrices(dt);
      auto toks = some_tokens(24, c.vocab_size, 8);
      for (DType kv : {DType::F32, DType::F16})
        for (int threads : {1, 2, 3})
          EXPECT_EQ(test::decode_differences_from_prefill(w, toks, threads, kv), 0u)
              << dtype_name(dt) << " " << c.describe() << ", " << threads << " threads, KV cache "
              << dtype_name(kv);
    }
}

// An f16 KV cache (--kv-cache f16) rounds every key and value once: the logits stay within f16
// rounding of the f32 reference, for both families, in prefill and in decode — and it holds and
// reads half the bytes.
TEST(Transformer, F16KvCacheStaysCloseToTheReference) {
  for (const ModelConfig& c : {tiny_llama(2), tiny_gpt2()}) {
    ModelWeights w = test_weights(c, 10);
    auto toks = some_tokens(30, c.vocab_size, 10);
    auto ref = reference_logits(w, toks);
    Transformer f32(w), f16(w, 0, DType::F16);
    EXPECT_EQ(f16.kv_cache_dtype(), DType::F16);
    const double exact = max_diff_all(f32, ref, toks), rounded = max_diff_all(f16, ref, toks);
    EXPECT_LE(exact, 1e-4) << c.describe();
    EXPECT_LE(rounded, 2e-2) << c.describe();
    EXPECT_GT(rounded, exact) << "the f16 cache rounded nothing: " << c.describe();
    double kv32 = f32.decode_bytes(29) - f32.decode_bytes(0), kv16 = f16.decode_bytes(29) - f16.decode_bytes(0);
    EXPECT_DOUBLE_EQ(kv16 * 2, kv32) << c.describe();
  }
}

// The bytes a decode step reads, as `orion bench generate` reads them for its bound: every matrix
// once, the classifier's vocabulary rows, and each layer's keys and values of the positions so far
// (one more position: one more key and value per layer). Reading them all stays inside the
// weights and the cache (the sanitizer build checks every byte).
TEST(Transformer, DecodeReadsAreTheMatricesAndTheCachedPositions) {
  for (const ModelConfig& c : {tiny_llama(2), tiny_gpt2()})
    for (DType kv : {DType::F32, DType::F16}) {
      ModelWeights w = test_weights(c, 11);
      Transformer tf(w, 0, kv);
      const double per_position = double(c.n_layers) * 2 * c.kv_dim() * (kv == DType::F16 ? 2 : 4);
      // (the classifier's padding rows past the vocabulary, llm.c's Vp, are not read)
      const double padding = double(w.classifier.nbytes() - dtype_bytes(w.classifier.dtype, size_t(c.vocab_size) * c.dim));
      EXPECT_DOUBLE_EQ(tf.decode_bytes(0), double(w.matrix_bytes()) - padding + per_position) << c.describe();
      EXPECT_DOUBLE_EQ(tf.decode_bytes(9) - tf.decode_bytes(0), 9 * per_position) << c.describe();
      const std::vector<cpu::ByteRange> reads = tf.decode_reads(9);
      for (const LayerWeights& l : w.layers)
        for (const Tensor* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2})
          EXPECT_EQ(std::count_if(reads.begin(), reads.end(), [&](const cpu::ByteRange& r) {
                      return r.data == m->data && r.bytes == m->nbytes();
                    }),
                    1);
      uint64_t fold = 0;
      EXPECT_GT(cpu::time_read_pass(reads, &fold), 0.0);
    }
}

}  // namespace
}  // namespace orion
