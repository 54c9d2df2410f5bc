// Every CPU kernel against a naive reference written here (plain loops, double accumulation), on
// every instruction set this CPU has, for sizes that are not multiples of any vector width.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "kernel_test_util.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/kernels_impl.h"

namespace orion::cpu {
namespace {

using test::available_isas;
using test::RestoreIsa;
using test::random_floats;

// A weight matrix stored in dtype dt, and the fp32 values the kernels must see (each stored
// element converted with base/dtype.h, the same conversion the kernels are held to).
struct Weights {
  DType dt;
  std::vector<uint8_t> bytes;
  std::vector<float> f32;
};

Weights make_weights(DType dt, size_t n, uint32_t seed) {
  Weights w{dt, std::vector<uint8_t>(n * dtype_size(dt)), random_floats(n, seed)};
  for (size_t i = 0; i < n; i++) {
    if (dt == DType::F32) std::memcpy(&w.bytes[i * 4], &w.f32[i], 4);
    if (dt == DType::F16 || dt == DType::BF16) {
      const uint16_t h = dt == DType::F16 ? f32_to_f16(w.f32[i]) : f32_to_bf16(w.f32[i]);
      std::memcpy(&w.bytes[i * 2], &h, 2);
      w.f32[i] = dt == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return w;
}

// --- matmul --------------------------------------------------------------------------------------

// y[m, n] = Σ_k x[m, k]·W[n, k] + bias[n], in double. `mag` gets Σ_k |x·W| + |bias|, the scale
// against which float rounding is measured (a relative error of the sum would blow up when the
// terms cancel).
void matmul_ref(std::vector<double>& y, std::vector<double>& mag, const std::vector<float>& x, const std::vector<float>& W,
                const float* bias, int M, int K, int N) {
  y.assign(size_t(M) * N, 0), mag.assign(size_t(M) * N, 0);
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double s = bias ? bias[n] : 0, a = bias ? std::fabs(bias[n]) : 0;
      for (int k = 0; k < K; k++) {
        const double p = double(x[size_t(m) * K + k]) * double(W[size_t(n) * K + k]);
        s += p, a += std::fabs(p);
      }
      y[size_t(m) * N + n] = s, mag[size_t(m) * N + n] = a;
    }
}

TEST(Kernels, MatmulMatchesReferenceEveryIsaDtypeAndShape) {
  RestoreIsa restore;
  const int Ms[] = {1, 3, 17};
  const int Ks[] = {1, 7, 16, 33, 100, 773};
  const int Ns[] = {1, 5, 17, 67};
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (int M : Ms)
        for (int K : Ks)
          for (int N : Ns)
            for (bool with_bias : {false, true}) {
              const Weights W = make_weights(dt, size_t(N) * K, uint32_t(K * 131 + N));
              const std::vector<float> x = random_floats(size_t(M) * K, uint32_t(M + K));
              const std::vector<float> b = random_floats(size_t(N), 7);
              const float* bias = with_bias ? b.data() : nullptr;
              std::vector<float> y(size_t(M) * N, NAN);
              matmul(y.data(), x.data(), W.bytes.data(), dt, bias, M, K, N);
              std::vector<double> ref, mag;
              matmul_ref(ref, mag, x, W.f32, bias, M, K, N);
              for (size_t i = 0; i < y.size(); i++)
                ASSERT_NEAR(y[i], ref[i], 1e-5 * mag[i] + 1e-30)
                    << isa_name(isa) << " " << dtype_name(dt) << " M=" << M << " K=" << K << " N=" << N
                    << " bias=" << with_bias << " i=" << i;
            }
  }
}

// Greedy generation must not depend on the thread count, so neither may one bit of a matmul.
TEST(Kernels, MatmulBitIdenticalForOneAndTwoThreads) {
  RestoreIsa restore;
  struct Shape {
    int M, K, N;
  };
  const Shape shapes[] = {{1, 773, 1001}, {1, 768, 2048}, {3, 100, 517}, {17, 773, 1001}, {64, 768, 2048}};
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (const Shape& s : shapes) {
        const Weights W = make_weights(dt, size_t(s.N) * s.K, 3);
        const std::vector<float> x = random_floats(size_t(s.M) * s.K, 4), b = random_floats(size_t(s.N), 5);
        std::vector<float> y1(size_t(s.M) * s.N), y2(y1.size());
        set_num_threads(1);
        matmul(y1.data(), x.data(), W.bytes.data(), dt, b.data(), s.M, s.K, s.N);
        set_num_threads(2);
        matmul(y2.data(), x.data(), W.bytes.data(), dt, b.data(), s.M, s.K, s.N);
        EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0)
            << isa_name(isa) << " " << dtype_name(dt) << " M=" << s.M << " K=" << s.K << " N=" << s.N;
      }
  }
}

// A batched decode step's products (a few tokens, big enough to share out: the threads take rows
// with work stealing) give every token the bits of its own single-token product, at any thread count.
TEST(Kernels, FewTokenProductsSharedByThreadsEqualEachTokensMatvec) {
  RestoreIsa restore;
  const int K = 768;
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (DType dt : {DType::F32, DType::F16, DType::BF16})  // q8_0: test_kernels_q8.cpp
      for (int M : {2, 8, 16})
        for (int N : {1001, 2048}) {
          const Weights W = make_weights(dt, size_t(N) * K, uint32_t(31 * M + N));
          const std::vector<float> x = random_floats(size_t(M) * K, uint32_t(M)), b = random_floats(size_t(N), 5);
          std::vector<float> yd(size_t(M) * N);
          set_num_threads(1);
          for (int m = 0; m < M; m++)
            matmul(yd.data() + size_t(m) * N, x.data() + size_t(m) * K, W.bytes.data(), dt, b.data(), 1, K, N);
          for (int threads : {1, 2, 3}) {
            set_num_threads(threads);
            std::vector<float> y(size_t(M) * N, NAN);
            matmul(y.data(), x.data(), W.bytes.data(), dt, b.data(), M, K, N);
            EXPECT_EQ(std::memcmp(y.data(), yd.data(), y.size() * 4), 0)
                << isa_name(isa) << " " << dtype_name(dt) << " M=" << M << " N=" << N << " threads=" << threads;
          }
        }
  }
}

// A token gives the same logits whether it went through prefill (M > 1) or decode (M = 1).
// M = 9: the few-token tiles, which read a row in address order as decode does; M = 37: the prompt
// tiles, which sum the even groups and then the odd ones.
TEST(Kernels, PrefillRowsEqualDecodeBitForBit) {
  RestoreIsa restore;
  const int N = 131;
  for (int M : {9, 37})
  // K: a partial last group of 16 that is even (773 = 48·16 + 5) and odd (789 = 49·16 + 5) in the
  // AVX-512 kernels' two-accumulator order; of 8, for the AVX2 ones: even (773 = 96·8 + 5) and
  // odd (781 = 97·8 + 5).
  for (int K : {773, 781, 789})
  for (Isa isa : available_isas()) {
    SCOPED_TRACE(K);
    ASSERT_TRUE(set_isa(isa));
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      const Weights W = make_weights(dt, size_t(N) * K, 21);
      const std::vector<float> x = random_floats(size_t(M) * K, 22), b = random_floats(size_t(N), 23);
      std::vector<float> yp(size_t(M) * N), yd(size_t(M) * N);
      matmul(yp.data(), x.data(), W.bytes.data(), dt, b.data(), M, K, N);
      for (int m = 0; m < M; m++)
        matmul(yd.data() + size_t(m) * N, x.data() + size_t(m) * K, W.bytes.data(), dt, b.data(), 1, K, N);
      EXPECT_EQ(std::memcmp(yp.data(), yd.data(), yp.size() * 4), 0) << isa_name(isa) << " " << dtype_name(dt) << " M=" << M;
    }
  }
}

// The decode matvec's two row orders (kernels.h, MatvecOrder) read W differently and sum every row
// the same way: each gives the prefill rows' bits, for every dtype, on every instruction set.
TEST(Kernels, DecodeRowOrdersBothEqualPrefillBitForBit) {
  RestoreIsa restore;
  const MatvecOrder before = matvec_order();
  const int M = 5, N = 1001;  // N: not a multiple of 8
  // K: 25 q8_0 blocks (odd: the AVX-512 q8_0 kernels' half-pair tail), 50 vectors of 16; and 24
  // blocks (even: whole pairs only)
  for (int K : {800, 768})
  for (Isa isa : available_isas()) {
    SCOPED_TRACE(K);
    const std::vector<float> x = random_floats(size_t(M) * K, 31), b = random_floats(size_t(N), 32);
    ASSERT_TRUE(set_isa(isa));
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
      Weights W = make_weights(dt == DType::Q8_0 ? DType::F32 : dt, size_t(N) * K, 33);
      if (dt == DType::Q8_0) {
        W.bytes.assign(dtype_bytes(DType::Q8_0, size_t(N) * K), 0);
        quantize_q8_0(W.f32.data(), reinterpret_cast<BlockQ8_0*>(W.bytes.data()), W.f32.size());
      }
      std::vector<float> yp(size_t(M) * N);
      matmul(yp.data(), x.data(), W.bytes.data(), dt, b.data(), M, K, N);
      for (MatvecOrder order : {MatvecOrder::RowByRow, MatvecOrder::RowBlocks}) {
        set_matvec_order(order);
        std::vector<float> yd(size_t(M) * N, NAN);
        for (int m = 0; m < M; m++)
          matmul(yd.data() + size_t(m) * N, x.data() + size_t(m) * K, W.bytes.data(), dt, b.data(), 1, K, N);
        // and a thread's part of the rows (a decode step's matvec_range), starting mid-block
        std::vector<float> part(size_t(N), NAN);
        matvec_range(part.data(), x.data(), W.bytes.data(), dt, b.data(), K, 3, 998);
        EXPECT_EQ(std::memcmp(yp.data(), yd.data(), yp.size() * 4), 0)
            << isa_name(isa) << " " << dtype_name(dt) << " order " << matvec_order_name(order);
        EXPECT_EQ(std::memcmp(part.data() + 3, yd.data() + 3, 995 * 4), 0)
            << isa_name(isa) << " " << dtype_name(dt) << " order " << matvec_order_name(order);
      }
      set_matvec_order(before);
    }
  }
}

// --- normalisation and elementwise -------------------------------------------------------------

TEST(Kernels, RmsnormAndLayernorm) {
  RestoreIsa restore;
  const int M = 3, C = 37;
  const float eps = 1e-5f;
  const std::vector<float> x = random_floats(size_t(M) * C, 1, -2, 3), w = random_floats(C, 2), b = random_floats(C, 3);
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    std::vector<float> y(x.size()), z(x.size());
    rmsnorm(y.data(), x.data(), w.data(), M, C, eps);
    layernorm(z.data(), x.data(), w.data(), b.data(), M, C, eps);
    for (int m = 0; m < M; m++) {
      double ss = 0, mean = 0, var = 0;
      for (int i = 0; i < C; i++) ss += double(x[m * C + i]) * x[m * C + i], mean += x[m * C + i];
      mean /= C;
      for (int i = 0; i < C; i++) var += (x[m * C + i] - mean) * (x[m * C + i] - mean);
      for (int i = 0; i < C; i++) {
        const double r = x[m * C + i] / std::sqrt(ss / C + eps) * w[i];
        const double l = (x[m * C + i] - mean) / std::sqrt(var / C + eps) * w[i] + b[i];
        EXPECT_NEAR(y[m * C + i], r, 1e-5 * (1 + std::fabs(r))) << isa_name(isa);
        EXPECT_NEAR(z[m * C + i], l, 1e-5 * (1 + std::fabs(l))) << isa_name(isa);
      }
    }
  }
}

TEST(Kernels, Elementwise) {
  RestoreIsa restore;
  const size_t n = 1003;
  const std::vector<float> a = random_floats(n, 1, -6, 6), g = random_floats(n, 2, -8, 8), u = random_floats(n, 3);
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    std::vector<float> y = u;
    add_inplace(y.data(), a.data(), n);
    for (size_t i = 0; i < n; i++) EXPECT_EQ(y[i], u[i] + a[i]);

    std::vector<float> gl = a;
    gelu_tanh_inplace(gl.data(), n);
    for (size_t i = 0; i < n; i++) {
      const double v = a[i], r = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      EXPECT_NEAR(gl[i], r, 1e-6 * (1 + std::fabs(r))) << isa_name(isa) << " gelu(" << v << ")";
    }

    std::vector<float> h(n);
    swiglu(h.data(), g.data(), u.data(), n);
    for (size_t i = 0; i < n; i++) {
      const double r = double(g[i]) / (1 + std::exp(-double(g[i]))) * u[i];
      EXPECT_NEAR(h[i], r, 1e-6 * (1 + std::fabs(r))) << isa_name(isa);
    }

    // Each element's bits depend on its inputs only, not on the range a call is given (a decode
    // step applies them to the rows a thread took, prefill to whole rows), and h may be the gate.
    std::vector<float> gl2 = a, h2 = g;
    for (size_t b : {size_t(0), size_t(100), size_t(531)}) {
      const size_t e = b == 0 ? 100 : b == 100 ? 531 : n;
      gelu_tanh_inplace(gl2.data() + b, e - b);
      swiglu(h2.data() + b, h2.data() + b, u.data() + b, e - b);
    }
    EXPECT_EQ(gl2, gl) << isa_name(isa);
    EXPECT_EQ(h2, h) << isa_name(isa);

    for (int len : {1, 5, 1003}) {
      std::vector<float> s(a.begin(), a.begin() + len);
      for (float& v : s) v *= 10;  // wide range: exercises the max subtraction
      std::vector<float> sm = s;
      softmax_inplace(sm.data(), len);
      double mx = s[0], sum = 0;
      for (int i = 0; i < len; i++) mx = std::max(mx, double(s[i]));
      for (int i = 0; i < len; i++) sum += std::exp(s[i] - mx);
      for (int i = 0; i < len; i++) EXPECT_NEAR(sm[i], std::exp(s[i] - mx) / sum, 1e-6) << isa_name(isa);
    }
  }
}

// --- embeddings and positions --------------------------------------------------------------------

TEST(Kernels, EmbeddingRowConvertsExactly) {
  RestoreIsa restore;
  const int rows = 5, C = 37;
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      const Weights T = make_weights(dt, size_t(rows) * C, 11);
      std::vector<float> out(C);
      for (int id : {0, 3, 4}) {
        embedding_row(out.data(), T.bytes.data(), dt, id, C);
        for (int i = 0; i < C; i++) EXPECT_EQ(out[i], T.f32[size_t(id) * C + i]) << isa_name(isa) << dtype_name(dt);
      }
    }
  }
}

TEST(Kernels, RopeMatchesLlama2c) {
  RestoreIsa restore;
  const int NH = 3, HS = 10;
  const float theta = 10000.0f;
  const std::vector<float> x0 = random_floats(size_t(NH) * HS, 9);
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (int pos : {0, 1, 7, 300}) {
      std::vector<float> x = x0;
      rope(x.data(), NH, HS, pos, theta);
      for (int h = 0; h < NH; h++)
        for (int i = 0; i < HS; i += 2) {
          // llama2.c's float formula, element by element: the kernel must equal it bit for bit.
          const float freq = 1.0f / powf(theta, float(i) / float(HS)), a = float(pos) * freq;
          const float c = cosf(a), s = sinf(a), v0 = x0[h * HS + i], v1 = x0[h * HS + i + 1];
          EXPECT_EQ(x[h * HS + i], v0 * c - v1 * s) << isa_name(isa) << " pos=" << pos;
          EXPECT_EQ(x[h * HS + i + 1], v0 * s + v1 * c) << isa_name(isa) << " pos=" << pos;
          // And the rotation itself, in double (the float angle drifts by ~pos·1e-7 rad).
          const double ad = pos * std::pow(double(theta), -double(i) / HS);
          EXPECT_NEAR(x[h * HS + i], v0 * std::cos(ad) - v1 * std::sin(ad), 1e-6 * (1 + pos));
        }
    }
  }
}

// --- attention -----------------------------------------------------------------------------------

TEST(Kernels, AttentionCausalGqa) {
  RestoreIsa restore;
  struct Case {
    int T, pos0, NH, NKV, HS;
  };
  const Case cases[] = {{1, 0, 4, 4, 16}, {1, 9, 4, 2, 20}, {5, 0, 6, 2, 20}, {5, 7, 4, 1, 67}, {3, 2, 2, 2, 64}};
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (const Case& c : cases) {
      const int L = c.pos0 + c.T, Q = c.NH * c.HS, KV = c.NKV * c.HS, stride = KV + 3;  // padded rows
      const std::vector<float> q = random_floats(size_t(c.T) * Q, 1, -2, 2);
      const std::vector<float> k = random_floats(size_t(L) * stride, 2, -2, 2), v = random_floats(size_t(L) * stride, 3);
      std::vector<float> out(size_t(c.T) * Q, NAN);
      attention(out.data(), q.data(), k.data(), v.data(), c.T, c.pos0, c.NH, c.NKV, KvLayout{size_t(stride), size_t(c.HS), c.HS});
      // The same cache head by head ([NKV, S, HS], room for S = L + 2 positions): the same sums, the same bits.
      const KvLayout heads = KvLayout::heads(L + 2, c.HS);
      std::vector<float> kh(size_t(L + 2) * KV, NAN), vh(size_t(L + 2) * KV, NAN), out_h(size_t(c.T) * Q, NAN);
      for (int p = 0; p < L; p++) {
        heads.store(kh.data(), p, k.data() + size_t(p) * stride, 0, KV);
        heads.store(vh.data(), p, v.data() + size_t(p) * stride, 0, KV);
      }
      attention(out_h.data(), q.data(), kh.data(), vh.data(), c.T, c.pos0, c.NH, c.NKV, heads);
      EXPECT_EQ(0, std::memcmp(out.data(), out_h.data(), out.size() * 4)) << isa_name(isa) << " T=" << c.T;
      for (int t = 0; t < c.T; t++)
        for (int h = 0; h < c.NH; h++) {
          const int kvh = h / (c.NH / c.NKV), len = c.pos0 + t + 1;
          std::vector<double> att(len);
          double mx = -1e300, sum = 0;
          for (int p = 0; p < len; p++) {
            double s = 0;
            for (int i = 0; i < c.HS; i++) s += double(q[t * Q + h * c.HS + i]) * k[p * stride + kvh * c.HS + i];
            att[p] = s / std::sqrt(double(c.HS)), mx = std::max(mx, att[p]);
          }
          for (int p = 0; p < len; p++) sum += (att[p] = std::exp(att[p] - mx));
          for (int i = 0; i < c.HS; i++) {
            double o = 0;
            for (int p = 0; p < len; p++) o += att[p] / sum * v[p * stride + kvh * c.HS + i];
            ASSERT_NEAR(out[t * Q + h * c.HS + i], o, 1e-5)
                << isa_name(isa) << " T=" << c.T << " pos0=" << c.pos0 << " h=" << h << " i=" << i;
          }
        }
    }
  }
}

// A head's scores and weighted sum, computed several positions (or a slice of channels over all
// positions) at a time, are the plain per-position dot and axpy loops bit for bit: decode's
// attention must not change the logits. Their f16-cache forms equal them over the widened values.
TEST(Kernels, AttentionScoresAndWeightedSumEqualTheDotAndAxpyLoops) {
  RestoreIsa restore;
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    const IsaKernels& ker = isa_kernels();
    for (int HS : {5, 20, 64, 72, 128, 130})  // 64 and 128: the compile-time head sizes
      for (int len : {1, 3, 4, 7, 33}) {
        const int stride = 3 * HS + 5;
        const std::vector<float> q = random_floats(size_t(HS), 11, -2, 2);
        const std::vector<float> k = random_floats(size_t(len) * stride, 12, -2, 2);
        const std::vector<float> v = random_floats(size_t(len) * stride, 13);
        const std::vector<float> att = random_floats(size_t(len), 14, 0, 1);
        const float scale = 1.0f / std::sqrt(float(HS));
        std::vector<float> got(static_cast<size_t>(len)), want(static_cast<size_t>(len));
        ker.scores(got.data(), q.data(), k.data(), len, HS, stride, scale);
        for (int p = 0; p < len; p++) want[p] = ker.dot(q.data(), k.data() + size_t(p) * stride, HS) * scale;
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << isa_name(isa) << " HS=" << HS << " len=" << len;
        std::vector<float> out(static_cast<size_t>(HS), NAN), ref(static_cast<size_t>(HS), 0.0f);
        ker.weighted_sum(out.data(), att.data(), v.data(), len, HS, stride);
        for (int p = 0; p < len; p++) ker.axpy(ref.data(), att[p], v.data() + size_t(p) * stride, HS);
        EXPECT_EQ(0, std::memcmp(out.data(), ref.data(), out.size() * 4)) << isa_name(isa) << " HS=" << HS << " len=" << len;
        // The f16 forms (an f16 KV cache) are these kernels over the f16 values widened.
        std::vector<uint16_t> k16(k.size()), v16(v.size());
        std::vector<float> kw(k.size()), vw(v.size());
        for (size_t i = 0; i < k.size(); i++) k16[i] = f32_to_f16(k[i]), kw[i] = f16_to_f32(k16[i]);
        for (size_t i = 0; i < v.size(); i++) v16[i] = f32_to_f16(v[i]), vw[i] = f16_to_f32(v16[i]);
        ker.scores_f16(got.data(), q.data(), k16.data(), len, HS, stride, scale);
        ker.scores(want.data(), q.data(), kw.data(), len, HS, stride, scale);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << isa_name(isa) << " f16 HS=" << HS << " len=" << len;
        ker.weighted_sum_f16(out.data(), att.data(), v16.data(), len, HS, stride);
        ker.weighted_sum(ref.data(), att.data(), vw.data(), len, HS, stride);
        EXPECT_EQ(0, std::memcmp(out.data(), ref.data(), out.size() * 4)) << isa_name(isa) << " f16 HS=" << HS << " len=" << len;
      }
  }
}

// KvLayout::store puts any run of a row's channels where at() says, crossing heads, and nothing else.
TEST(Kernels, KvLayoutStoresChannelRunsAcrossHeads) {
  const int NKV = 3, HS = 5, S = 4, KV = NKV * HS;
  for (const KvLayout& kv : {KvLayout::rows(KV, HS), KvLayout::heads(S, HS)}) {
    std::vector<float> cache(size_t(S) * KV, -1.0f), row(static_cast<size_t>(KV));
    for (int c = 0; c < KV; c++) row[size_t(c)] = float(c);
    kv.store(cache.data(), 2, row.data(), 3, 12);  // channels 3..11: the end of head 0, head 1, the start of head 2
    int written = 0;
    for (int g = 0; g < NKV; g++)
      for (int i = 0; i < HS; i++) {
        const int c = g * HS + i;
        EXPECT_EQ(cache[kv.at(g, 2) + size_t(i)], c >= 3 && c < 12 ? float(c) : -1.0f) << "channel " << c;
      }
    for (float x : cache) written += x >= 0;
    EXPECT_EQ(written, 9);
  }
}

// A sliding window of W positions: each query sees exactly the keys attention() over the last W
// cached rows alone would give it — the same numbers as a causal attention on a cache that starts
// W − 1 positions before it.
TEST(Kernels, AttentionSlidingWindowSeesTheLastWindowPositions) {
  RestoreIsa restore;
  const int NH = 4, NKV = 2, HS = 16, Q = NH * HS, KV = NKV * HS, W = 3, T = 6, pos0 = 4, L = pos0 + T;
  const std::vector<float> q = random_floats(size_t(T) * Q, 11, -2, 2);
  const std::vector<float> k = random_floats(size_t(L) * KV, 12, -2, 2), v = random_floats(size_t(L) * KV, 13);
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    std::vector<float> windowed(size_t(T) * Q), full(size_t(T) * Q);
    attention(windowed.data(), q.data(), k.data(), v.data(), T, pos0, NH, NKV, KvLayout::rows(KV, HS), W);
    attention(full.data(), q.data(), k.data(), v.data(), T, pos0, NH, NKV, KvLayout::rows(KV, HS));
    for (int t = 0; t < T; t++) {
      const int pos = pos0 + t, first = attention_start(pos, W);
      EXPECT_EQ(first, std::max(0, pos - W + 1));
      // The query alone against rows first..pos: a one-token attention at position pos − first.
      std::vector<float> one(static_cast<size_t>(Q));
      attention(one.data(), q.data() + size_t(t) * Q, k.data() + size_t(first) * KV, v.data() + size_t(first) * KV, 1,
                pos - first, NH, NKV, KvLayout::rows(KV, HS));
      for (int i = 0; i < Q; i++) EXPECT_EQ(windowed[size_t(t) * Q + i], one[size_t(i)]) << isa_name(isa) << " t=" << t;
      double moved = 0;
      for (int i = 0; i < Q; i++) moved += std::fabs(windowed[size_t(t) * Q + i] - full[size_t(t) * Q + i]);
      EXPECT_GT(moved, 1e-3) << "the window changes nothing at t=" << t;
    }
  }
}

// Angles from a frequency table equal rope_angles' own, bit for bit, when the table is the plain one.
TEST(Kernels, RopeAnglesFromFrequenciesEqualThePlainOnes) {
  const int HS = 12;
  std::vector<float> inv_freq(HS / 2), a(HS), b(HS);
  rope_frequencies(inv_freq.data(), HS, 500000.0f);
  for (int pos : {0, 5, 1000}) {
    rope_angles(a.data(), HS, pos, 500000.0f);
    rope_angles(b.data(), inv_freq.data(), HS, pos);
    EXPECT_EQ(a, b) << pos;
  }
}

// --- threads, instruction sets, bandwidth ----------------------------------------------------------

TEST(Kernels, ThreadsAndIsaControls) {
  RestoreIsa restore;
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(0);
  EXPECT_EQ(num_threads(), omp_get_num_procs());
  EXPECT_TRUE(set_isa(Isa::Generic));
  EXPECT_EQ(active_isa(), Isa::Generic);
  EXPECT_STREQ(isa_name(Isa::Generic), "generic");
  EXPECT_STREQ(isa_name(Isa::Avx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::Avx512), "avx512");
  for (Isa isa : available_isas()) EXPECT_EQ(set_isa(isa) && active_isa() == isa, true);
}

TEST(Kernels, StreamTriadReportsAPlausibleBandwidth) {
  const double bw = stream_triad_bandwidth(4u << 20, 3);
  EXPECT_GT(bw, 1e8);   // > 0.1 GB/s
  EXPECT_LT(bw, 1e13);  // < 10 TB/s
}

// The read pass behind the decode bound reads every byte of its ranges once, whatever the number
// of threads and wherever a range starts: its fold is the XOR of all their lines' words and of the
// bytes around them (a word read twice or skipped changes it).
TEST(Kernels, ReadPassReadsEveryByteOnce) {
  RestoreIsa restore;
  std::vector<uint64_t> big(size_t(1) << 19);  // 4 MB
  std::mt19937_64 rng(5);
  for (uint64_t& w : big) w = rng();
  const char* bytes = reinterpret_cast<const char*>(big.data());
  // A whole buffer, a range starting off a word boundary with a ragged end (a whole step of no
  // ISA's fold), one 32 bytes past a line boundary (a GGUF file's tensor), one of 7 bytes, an empty one.
  const char* line = bytes + (64 - reinterpret_cast<uintptr_t>(bytes) % 64) % 64;
  const std::vector<ByteRange> ranges = {
      {big.data(), big.size() * 8}, {bytes + 3, 1001}, {line + 32, 100000}, {bytes + 64, 7}, {bytes, 0}};
  uint64_t expect = 0;
  for (const ByteRange& r : ranges) {  // whole lines as words, the bytes around them one by one
    const char* p = static_cast<const char*>(r.data);
    size_t i = 0;
    for (; i < r.bytes && reinterpret_cast<uintptr_t>(p + i) % 64 != 0; i++) expect ^= uint8_t(p[i]);
    for (; i + 64 <= r.bytes; i += 64)
      for (size_t k = 0; k < 64; k += 8) {
        uint64_t w;
        std::memcpy(&w, p + i + k, 8);
        expect ^= w;
      }
    for (; i < r.bytes; i++) expect ^= uint8_t(p[i]);
  }
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      uint64_t fold = 0;
      const double s = time_read_pass(ranges, &fold);
      EXPECT_EQ(fold, expect) << isa_name(isa) << ", " << threads << " threads";
      const double bytes_per_s = double(big.size() * 8 + 101008) / s;
      EXPECT_GT(bytes_per_s, 1e8);   // > 0.1 GB/s
      EXPECT_LT(bytes_per_s, 1e13);  // < 10 TB/s
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

}  // namespace
}  // namespace orion::cpu
