// q8_0 weights: the block format against llama.cpp's definition, and the int8 matmul kernels of
// every instruction set this CPU has (AVX2 and AVX-512 with and without VNNI) against a reference
// written here: the activations quantised the same way, then every block's products summed exactly
// and scaled in double — so the kernels may differ from it only by fp32 rounding of the scaled sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "kernel_test_util.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/kernels_q8.h"

namespace orion::cpu {
namespace {

using test::random_floats;

// --- the format ------------------------------------------------------------------------------------

TEST(Q8Format, BlockMatchesLlamaCppDefinition) {
  // amax 2.54 → d = 0.02 (stored as fp16); 0.01 = d/2 rounds away from zero to 1, −0.01 to −1;
  // 0.029 → 1.45 → 1; 2.54 → 127; −2.54 → −127.
  float x[kQ8Block] = {};
  x[0] = 2.54f, x[1] = -2.54f, x[2] = 0.01f, x[3] = -0.01f, x[4] = 0.029f, x[5] = 1.0f;
  BlockQ8_0 b;
  quantize_q8_0(x, &b, kQ8Block);
  const float d = 2.54f / 127.0f;
  EXPECT_EQ(b.d, f32_to_f16(d));
  const float inv = 1.0f / d;
  EXPECT_EQ(b.q[0], 127);
  EXPECT_EQ(b.q[1], -127);
  EXPECT_EQ(b.q[2], int8_t(std::round(0.01f * inv)));
  EXPECT_EQ(b.q[3], -b.q[2]);
  EXPECT_EQ(b.q[4], 1);
  EXPECT_EQ(b.q[5], int8_t(std::round(1.0f * inv)));
  for (int i = 6; i < kQ8Block; i++) EXPECT_EQ(b.q[i], 0);
  // The byte layout: fp16 scale first, then the 32 quants.
  uint8_t bytes[kQ8BlockBytes];
  std::memcpy(bytes, &b, kQ8BlockBytes);
  EXPECT_EQ(bytes[0] | bytes[1] << 8, b.d);
  EXPECT_EQ(int8_t(bytes[2]), 127);
  // An all-zero block has scale 0 and zero quants (no division by zero).
  float z[kQ8Block] = {};
  quantize_q8_0(z, &b, kQ8Block);
  EXPECT_EQ(b.d, 0);
  for (int i = 0; i < kQ8Block; i++) EXPECT_EQ(b.q[i], 0);
}

TEST(Q8Format, RoundTripErrorWithinHalfAStepAndConvertDtypeAgrees) {
  const size_t n = 32 * 50;
  const std::vector<float> x = random_floats(n, 1, -3, 3);
  std::vector<BlockQ8_0> q(n / kQ8Block);
  quantize_q8_0(x.data(), q.data(), n);
  std::vector<float> back(n);
  dequantize_q8_0(q.data(), back.data(), n);
  for (size_t i = 0; i < n; i++) {
    const float d = f16_to_f32(q[i / kQ8Block].d);
    // Half a step, plus what rounding the scale to fp16 moves the largest quant (127 · 2^-11 · d).
    EXPECT_LE(std::fabs(back[i] - x[i]), 0.5f * d + 127 * d / 2048 + 1e-7f) << i;
    EXPECT_EQ(load_as_f32(q.data(), DType::Q8_0, i), back[i]);
  }
  // convert_dtype to and from q8_0 is the same quantisation, also from f16 input.
  std::vector<BlockQ8_0> q2(n / kQ8Block);
  convert_dtype(x.data(), DType::F32, q2.data(), DType::Q8_0, n);
  EXPECT_EQ(std::memcmp(q.data(), q2.data(), q.size() * kQ8BlockBytes), 0);
  std::vector<float> back2(n);
  convert_dtype(q.data(), DType::Q8_0, back2.data(), DType::F32, n);
  EXPECT_EQ(back, back2);
  EXPECT_EQ(dtype_bytes(DType::Q8_0, n), n / 32 * 34);
  // A non-finite scale is found, at its block's first element.
  size_t bad = 0;
  EXPECT_TRUE(all_finite(q.data(), DType::Q8_0, n, &bad));
  q[7].d = 0x7c00;  // +inf
  EXPECT_FALSE(all_finite(q.data(), DType::Q8_0, n, &bad));
  EXPECT_EQ(bad, 7u * kQ8Block);
}

// --- the kernels -------------------------------------------------------------------------------------

// Every kernel path the CPU has: each ISA, and AVX2 / AVX-512 with and without VNNI.
struct Path {
  Isa isa;
  bool vnni;
};
std::vector<Path> available_paths() {
  std::vector<Path> out;
  const Isa before = active_isa();
  for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512})
    if (set_isa(isa)) {
      out.push_back({isa, false});
      if ((isa == Isa::Avx2 && set_avx2_vnni(true)) || (isa == Isa::Avx512 && set_avx512_vnni(true)))
        out.push_back({isa, true});
    }
  set_isa(before);
  return out;
}
std::string path_name(const Path& p) { return std::string(isa_name(p.isa)) + (p.vnni ? "+vnni" : ""); }

// Restores the start-up instruction set, VNNI and the thread count when a test ends.
struct RestorePath {
  Isa isa = active_isa();
  int threads = num_threads();
  ~RestorePath() { set_isa(isa), set_avx2_vnni(true), set_avx512_vnni(true), set_num_threads(threads); }
};
void use(const Path& p) {
  ASSERT_TRUE(set_isa(p.isa));
  set_avx2_vnni(p.vnni);
  set_avx512_vnni(p.vnni);
}

// The activations as the kernels must quantise them (written out again here): per block of 32,
// d = max|x| / 127 in fp32, q = x · (1/d) rounded to nearest even.
void quantize_ref(const float* x, int K, std::vector<int>& q, std::vector<float>& d) {
  q.assign(size_t(K), 0), d.assign(size_t(K / 32), 0);
  for (int b = 0; b < K / 32; b++) {
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    d[b] = amax / 127.0f;
    const float inv = d[b] != 0 ? 1.0f / d[b] : 0.0f;
    for (int i = 0; i < 32; i++) q[b * 32 + i] = int(std::nearbyint(x[b * 32 + i] * inv));
  }
}

// y = x·Wᵀ + bias with the products of each block summed exactly, the scales applied in double;
// mag = Σ |product|·d_w·d_x + |bias|, the scale of the fp32 rounding allowed (SIMD paths scale
// partial sums of a block, which may be larger than the block's sum).
void matmul_ref(std::vector<double>& y, std::vector<double>& mag, const std::vector<float>& x,
                const std::vector<BlockQ8_0>& W, const float* bias, int M, int K, int N) {
  y.assign(size_t(M) * N, 0), mag.assign(size_t(M) * N, 0);
  std::vector<int> q;
  std::vector<float> d;
  for (int m = 0; m < M; m++) {
    quantize_ref(x.data() + size_t(m) * K, K, q, d);
    for (int n = 0; n < N; n++) {
      double s = bias ? bias[n] : 0, a = bias ? std::fabs(bias[n]) : 0;
      for (int b = 0; b < K / 32; b++) {
        const BlockQ8_0& w = W[size_t(n) * (K / 32) + b];
        long dot = 0, abs_dot = 0;
        for (int i = 0; i < 32; i++) dot += long(w.q[i]) * q[b * 32 + i], abs_dot += std::labs(long(w.q[i]) * q[b * 32 + i]);
        const double scale = double(f16_to_f32(w.d)) * d[b];
        s += double(dot) * scale, a += double(abs_dot) * scale;
      }
      y[size_t(m) * N + n] = s, mag[size_t(m) * N + n] = a;
    }
  }
}

std::vector<BlockQ8_0> random_q8(int N, int K, uint32_t seed) {
  const std::vector<float> w = random_floats(size_t(N) * K, seed);
  std::vector<BlockQ8_0> q(size_t(N) * K / 32);
  quantize_q8_0(w.data(), q.data(), w.size());
  return q;
}

// Every ISA's activation quantisation gives the reference's scales and int8 bit for bit: random
// blocks of several magnitudes, a zero block, and a block whose products land exactly halfway
// between integers (max|x| = 127, so x·(1/d) = x: 2.5 → 2, 3.5 → 4, −0.5 → −0).
TEST(Q8Kernels, ActivationQuantisationEqualsTheReferenceOnEveryIsa) {
  RestorePath restore;
  const int K = 32 * 9;
  std::vector<float> x = random_floats(size_t(K), 21, -3, 3);
  for (int i = 32; i < 64; i++) x[size_t(i)] *= 1e-3f;
  for (int i = 64; i < 96; i++) x[size_t(i)] *= 1e4f;
  for (int i = 96; i < 128; i++) x[size_t(i)] = 0;
  for (int i = 128; i < 160; i++) x[size_t(i)] = float(i - 144) + 0.5f;  // −15.5 … 15.5
  x[160 - 1] = 127;                                                      // the block's max
  std::vector<int> want_q;
  std::vector<float> want_d;
  quantize_ref(x.data(), K, want_q, want_d);
  for (const Path& p : available_paths()) {
    use(p);
    const Q8Activations a = quantize_activations(x.data(), 1, K);
    for (int b = 0; b < K / 32; b++) EXPECT_EQ(a.d[b], want_d[size_t(b)]) << isa_name(p.isa) << " block " << b;
    for (int i = 0; i < K; i++) ASSERT_EQ(int(a.q[i]), want_q[size_t(i)]) << isa_name(p.isa) << " value " << i;
  }
}

TEST(Q8Kernels, MatmulMatchesExactIntegerReferenceOnEveryPath) {
  RestorePath restore;
  for (const Path& p : available_paths()) {
    use(p);
    for (int M : {1, 3, 17})
      for (int K : {32, 64, 96, 800})  // 1, 2, 3 and 25 blocks: odd counts take the AVX-512 tail
        for (int N : {1, 5, 17, 67})
          for (bool with_bias : {false, true}) {
            const std::vector<BlockQ8_0> W = random_q8(N, K, uint32_t(K * 131 + N));
            // Rows of different magnitudes, and one zero block (its scale is 0).
            std::vector<float> x = random_floats(size_t(M) * K, uint32_t(M + K), -4, 4);
            for (int i = 0; i < 32; i++) x[i] = 0;
            const std::vector<float> b = random_floats(size_t(N), 7);
            const float* bias = with_bias ? b.data() : nullptr;
            std::vector<float> y(size_t(M) * N, NAN);
            matmul(y.data(), x.data(), W.data(), DType::Q8_0, bias, M, K, N);
            std::vector<double> ref, mag;
            matmul_ref(ref, mag, x, W, bias, M, K, N);
            for (size_t i = 0; i < y.size(); i++)
              ASSERT_NEAR(y[i], ref[i], 1e-6 * mag[i] + 1e-30)
                  << path_name(p) << " M=" << M << " K=" << K << " N=" << N << " bias=" << with_bias << " i=" << i;
          }
  }
}

// The int8 result stays close to the fp32 product with the dequantised weights: what quantising
// the activations costs (a relative error of ~1/254 per element, mostly cancelling).
TEST(Q8Kernels, CloseToFloatProductOfDequantisedWeights) {
  RestorePath restore;
  const int M = 2, K = 768, N = 64;
  const std::vector<BlockQ8_0> W = random_q8(N, K, 5);
  std::vector<float> Wf(size_t(N) * K);
  dequantize_q8_0(W.data(), Wf.data(), Wf.size());
  const std::vector<float> x = random_floats(size_t(M) * K, 6);
  std::vector<float> yq(size_t(M) * N), yf(size_t(M) * N);
  matmul(yq.data(), x.data(), W.data(), DType::Q8_0, nullptr, M, K, N);
  matmul(yf.data(), x.data(), Wf.data(), DType::F32, nullptr, M, K, N);
  double err = 0, norm = 0;
  for (size_t i = 0; i < yq.size(); i++) err += (yq[i] - yf[i]) * (yq[i] - yf[i]), norm += yf[i] * yf[i];
  EXPECT_LT(std::sqrt(err / norm), 0.01);
}

// M 2, 3, 5, 6, 9: full token tiles and every count of tokens left after them on both ISAs
// (tiles of 4 on AVX-512, 3 on AVX2).
TEST(Q8Kernels, BitIdenticalForOneAndTwoThreadsAndPrefillEqualsDecode) {
  RestorePath restore;
  const int K = 800, N = 1001;
  const std::vector<BlockQ8_0> W = random_q8(N, K, 3);
  const std::vector<float> b = random_floats(size_t(N), 5);
  for (const Path& p : available_paths()) {
    use(p);
    for (int M : {2, 3, 5, 6, 9}) {
      const std::vector<float> x = random_floats(size_t(M) * K, uint32_t(4 + M));
      std::vector<float> y1(size_t(M) * N), y2(y1.size()), yd(y1.size());
      set_num_threads(1);
      matmul(y1.data(), x.data(), W.data(), DType::Q8_0, b.data(), M, K, N);
      set_num_threads(2);
      matmul(y2.data(), x.data(), W.data(), DType::Q8_0, b.data(), M, K, N);
      for (int m = 0; m < M; m++)
        matmul(yd.data() + size_t(m) * N, x.data() + size_t(m) * K, W.data(), DType::Q8_0, b.data(), 1, K, N);
      EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0) << path_name(p) << " M=" << M;
      EXPECT_EQ(std::memcmp(y1.data(), yd.data(), y1.size() * 4), 0) << path_name(p) << " M=" << M;
      if (M != 9) continue;
      // matvec_range on part of the rows gives those rows' bits.
      std::vector<float> part(size_t(N), NAN);
      matvec_range(part.data(), x.data(), W.data(), DType::Q8_0, b.data(), K, 7, 300);
      EXPECT_EQ(std::memcmp(part.data() + 7, yd.data() + 7, 293 * 4), 0) << path_name(p);
    }
  }
}

TEST(Q8Kernels, EmbeddingRowDequantises) {
  RestorePath restore;
  const int C = 64;
  const std::vector<BlockQ8_0> table = random_q8(5, C, 9);
  std::vector<float> want(size_t(5) * C), got(C);
  dequantize_q8_0(table.data(), want.data(), want.size());
  for (const Path& p : available_paths()) {
    use(p);
    embedding_row(got.data(), table.data(), DType::Q8_0, 3, C);
    for (int i = 0; i < C; i++) EXPECT_EQ(got[i], want[size_t(3) * C + i]) << path_name(p);
  }
}

}  // namespace
}  // namespace orion::cpu
