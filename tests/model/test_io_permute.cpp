// The Hugging Face q/k row permutation: a hand-built case, the round trip, and the reason it exists —
// rotate-half RoPE on the HF rows gives the same attention as llama2.c's interleaved RoPE on ours.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/io/io_internal.h"
#include "test_io_util.h"

namespace orion {
namespace {

// A [rows, cols] f32 tensor owned by w whose element (r, c) is r * 100 + c.
Tensor numbered(ModelWeights& w, int64_t rows, int64_t cols) {
  void* p;
  Tensor t = w.alloc_tensor({rows, cols}, DType::F32, &p);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) static_cast<float*>(p)[r * cols + c] = float(r * 100 + c);
  return t;
}

std::vector<int> row_ids(const Tensor& t) {
  std::vector<int> ids;
  for (int64_t r = 0; r < t.shape[0]; r++) ids.push_back(int(t.f32()[r * t.shape[1]] / 100));
  return ids;
}

TEST(HfPermutation, HandBuiltTwoHeads) {
  // 2 heads of HS = 6 (3 pairs). Interleaved rows of head 0: (x0,x1) (x2,x3) (x4,x5) are the pairs;
  // rotate-half keeps first members, then second members: x0 x2 x4 | x1 x3 x5.
  ModelWeights w;
  Tensor orig = numbered(w, 12, 3);
  Tensor hf = io::hf_permute_rows(w, orig, 2);
  EXPECT_EQ(row_ids(hf), (std::vector<int>{0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11}));
  EXPECT_EQ(hf.f32()[4 * 3 + 2], 302.0f);  // whole rows move: row 4 of hf is orig row 3, column 2 intact
  // And a hand-built HF tensor un-permutes to the interleaved order.
  Tensor hand = numbered(w, 12, 3);  // read its ids as rotate-half positions
  Tensor back = io::hf_unpermute_rows(w, hand, 2);
  EXPECT_EQ(row_ids(back), (std::vector<int>{0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11}));
}

TEST(HfPermutation, RoundTripsInEveryDtype) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    ModelWeights w = random_weights(test::tiny_llama(), 31, dt);
    const Tensor& wk = w.layers[1].wk;  // [NKV·HS, C] = [32, 64], 2 kv heads
    Tensor there = io::hf_permute_rows(w, wk, 2);
    EXPECT_NE(std::memcmp(there.data, wk.data, wk.nbytes()), 0);
    Tensor back = io::hf_unpermute_rows(w, there, 2);
    EXPECT_EQ(back.dtype, dt);
    EXPECT_EQ(std::memcmp(back.data, wk.data, wk.nbytes()), 0) << dtype_name(dt);
  }
}

// llama2.c RoPE: rotate pairs (x[2i], x[2i+1]) of each head by angle pos·θ^(−2i/HS).
void rope_interleaved(std::vector<float>& x, int heads, int HS, int pos) {
  for (int h = 0; h < heads; h++)
    for (int i = 0; i < HS / 2; i++) {
      float a = pos * std::pow(10000.0f, -2.0f * i / HS), c = std::cos(a), s = std::sin(a);
      float& x0 = x[h * HS + 2 * i];
      float& x1 = x[h * HS + 2 * i + 1];
      float r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
      x0 = r0, x1 = r1;
    }
}

// Hugging Face RoPE: rotate (x[i], x[i + HS/2]) of each head by the same angles.
void rope_rotate_half(std::vector<float>& x, int heads, int HS, int pos) {
  for (int h = 0; h < heads; h++)
    for (int i = 0; i < HS / 2; i++) {
      float a = pos * std::pow(10000.0f, -2.0f * i / HS), c = std::cos(a), s = std::sin(a);
      float& x0 = x[h * HS + i];
      float& x1 = x[h * HS + i + HS / 2];
      float r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
      x0 = r0, x1 = r1;
    }
}

std::vector<float> matvec(const Tensor& m, const std::vector<float>& x) {
  std::vector<float> y(size_t(m.shape[0]));
  for (int64_t r = 0; r < m.shape[0]; r++)
    for (int64_t c = 0; c < m.shape[1]; c++) y[size_t(r)] += m.f32()[r * m.shape[1] + c] * x[size_t(c)];
  return y;
}

TEST(HfPermutation, RotateHalfOnHfRowsEqualsInterleavedOnOrionRows) {
  ModelConfig c = test::tiny_llama();  // NH = 4, NKV = 2, HS = 16
  ModelWeights w = random_weights(c, 32);
  const int HS = c.head_dim();
  Tensor hf_q = io::hf_permute_rows(w, w.layers[0].wq, c.n_heads);
  Tensor hf_k = io::hf_permute_rows(w, w.layers[0].wk, c.n_kv_heads);
  std::mt19937 rng(5);
  std::normal_distribution<float> n01;
  std::vector<float> x1(64), x2(64);
  for (auto& v : x1) v = n01(rng);
  for (auto& v : x2) v = n01(rng);
  // Query at position 7 from x1, key at position 3 from x2; attention scores must agree per head.
  auto q = matvec(w.layers[0].wq, x1), k = matvec(w.layers[0].wk, x2);
  auto qh = matvec(hf_q, x1), kh = matvec(hf_k, x2);
  rope_interleaved(q, c.n_heads, HS, 7), rope_interleaved(k, c.n_kv_heads, HS, 3);
  rope_rotate_half(qh, c.n_heads, HS, 7), rope_rotate_half(kh, c.n_kv_heads, HS, 3);
  for (int h = 0; h < c.n_heads; h++) {
    int kv = h / (c.n_heads / c.n_kv_heads);
    float score = 0, score_hf = 0;
    for (int i = 0; i < HS; i++) score += q[h * HS + i] * k[kv * HS + i], score_hf += qh[h * HS + i] * kh[kv * HS + i];
    EXPECT_NEAR(score, score_hf, 1e-6f) << "head " << h;
    EXPECT_GT(std::fabs(score), 1e-4f) << "a zero score would prove nothing";
  }
}

}  // namespace
}  // namespace orion
