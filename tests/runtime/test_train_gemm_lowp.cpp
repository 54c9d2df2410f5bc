// runtime/cpu/train_gemm_lowp: C += round(A)·round(B) against a plain double loop over the rounded
// inputs, on every path this CPU has (vdpbf16ps, generic), for strided (transposed) operands, edge
// sizes around the 6 × 64 register tile and odd K; bit-identical for 1 and 2 threads; and the three
// linear-layer products routed through it by the process-wide precision.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_kernels.h"
#include "kernel_test_util.h"

using namespace orion;
using cpu::GemmPrecision;
using cpu::LowpPath;

namespace {

std::vector<float> randf(size_t n, uint32_t seed) { return cpu::test::random_floats(n, seed, -2, 2); }

double rounded(GemmPrecision p, float x) {
  return p == GemmPrecision::F16 ? f16_to_f32(f32_to_f16(x)) : bf16_to_f32(f32_to_bf16(x));
}

std::vector<LowpPath> paths(GemmPrecision p) {
  if (p == GemmPrecision::BF16 && cpu::bf16_dot_available()) return {LowpPath::Auto, LowpPath::Generic};
  return {LowpPath::Generic};
}

// One case: A is [M, K] (or its transpose [K, M] when a_t), B is [K, N] (or [N, K] when b_t).
void check_case(GemmPrecision prec, int M, int N, int K, bool a_t, bool b_t) {
  SCOPED_TRACE(testing::Message() << "prec=" << int(prec) << " M=" << M << " N=" << N << " K=" << K << " a_t=" << a_t
                                  << " b_t=" << b_t);
  const std::vector<float> A = randf(size_t(M) * K, 1 + M), B = randf(size_t(K) * N, 2 + N);
  const size_t rsa = a_t ? 1 : K, csa = a_t ? M : 1, rsb = b_t ? 1 : N, csb = b_t ? K : 1;
  const std::vector<float> C0 = randf(size_t(M) * N, 3);  // the products accumulate into C
  std::vector<double> ref(C0.begin(), C0.end());
  std::vector<double> mag(C0.size(), 0.0);  // Σ|a·b|: the scale of the rounding error
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      for (int p = 0; p < K; p++) {
        const double prod = rounded(prec, A[i * rsa + p * csa]) * rounded(prec, B[p * rsb + j * csb]);
        ref[size_t(i) * N + j] += prod, mag[size_t(i) * N + j] += std::fabs(prod);
      }
  for (LowpPath path : paths(prec)) {
    SCOPED_TRACE(path == LowpPath::Auto ? "path: vdpbf16ps" : "path: generic");
    std::vector<float> C1 = C0, C2 = C0;
    omp_set_num_threads(1);
    cpu::gemm_acc_lowp(prec, path, C1.data(), N, A.data(), rsa, csa, B.data(), rsb, csb, M, N, K);
    omp_set_num_threads(2);
    cpu::gemm_acc_lowp(prec, path, C2.data(), N, A.data(), rsa, csa, B.data(), rsb, csb, M, N, K);
    double worst = 0;
    for (size_t e = 0; e < C1.size(); e++) {
      // fp32 sums of K exact products: |error| ≤ K·2⁻²⁴·Σ|a·b| (+ the initial C's rounding).
      const double tol = (K + 2) * 0x1p-24 * (mag[e] + std::fabs(C0[e])) + 1e-30;
      worst = std::max(worst, std::fabs(C1[e] - ref[e]) / tol);
    }
    EXPECT_LE(worst, 1.0) << "worst error as a share of the fp32 summation bound";
    EXPECT_EQ(C1, C2) << "1 and 2 threads give the same bits";
  }
  // Rounding the inputs matters: bf16 is not fp32 (the test would pass a plain fp32 product otherwise).
  std::vector<float> C = C0;
  cpu::gemm_acc_lowp(prec, LowpPath::Generic, C.data(), N, A.data(), rsa, csa, B.data(), rsb, csb, M, N, K);
  double exact_err = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double e = C0[size_t(i) * N + j];
      for (int p = 0; p < K; p++) e += double(A[i * rsa + p * csa]) * B[p * rsb + j * csb];
      exact_err = std::max(exact_err, std::fabs(C[size_t(i) * N + j] - e));
    }
  if (size_t(M) * N * K >= 1000) EXPECT_GT(exact_err, 1e-4) << "the operands were rounded to 16 bits";
}

}  // namespace

TEST(TrainGemmLowp, Bf16MatchesTheRoundedReference) {
  std::printf("  vdpbf16ps on this CPU: %s\n", cpu::bf16_dot_available() ? "yes" : "no (generic path only)");
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, {7, 65, 3}, {6, 64, 256}, {13, 130, 515}, {50, 200, 600}, {97, 31, 1030}})
    for (bool a_t : {false, true})
      for (bool b_t : {false, true}) check_case(GemmPrecision::BF16, M, N, K, a_t, b_t);
}

TEST(TrainGemmLowp, Fp16MatchesTheRoundedReference) {
  for (auto [M, N, K] : {std::tuple{5, 70, 33}, {40, 100, 300}})
    for (bool a_t : {false, true}) check_case(GemmPrecision::F16, M, N, K, a_t, !a_t);
}

// The linear layer's three products under the process-wide setting: each equals gemm_acc_lowp on
// the same operands, and F32 (restored by the scope) is the plain path again.
TEST(TrainGemmLowp, LinearLayerProductsFollowThePrecision) {
  const int M = 48, K = 96, N = 80;
  const std::vector<float> x = randf(size_t(M) * K, 5), W = randf(size_t(N) * K, 6), dy = randf(size_t(M) * N, 7),
                           bias = randf(N, 8);
  std::vector<float> y32(size_t(M) * N), y16(size_t(M) * N), dx(size_t(M) * K, 0.f), dW(size_t(N) * K, 0.f);
  cpu::matmul_forward_train(y32.data(), x.data(), W.data(), bias.data(), M, K, N);
  {
    const cpu::ScopedGemmPrecision bf16(GemmPrecision::BF16);
    EXPECT_EQ(cpu::train_gemm_precision(), GemmPrecision::BF16);
    cpu::matmul_forward_train(y16.data(), x.data(), W.data(), bias.data(), M, K, N);
    cpu::matmul_backward_input(dx.data(), dy.data(), W.data(), M, K, N);
    cpu::matmul_backward_weight(dW.data(), dy.data(), x.data(), M, K, N);
  }
  EXPECT_EQ(cpu::train_gemm_precision(), GemmPrecision::F32);
  std::vector<float> y(size_t(M) * N), dx2(size_t(M) * K, 0.f), dW2(size_t(N) * K, 0.f);
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) y[size_t(m) * N + n] = bias[n];
  cpu::gemm_acc_lowp(GemmPrecision::BF16, LowpPath::Auto, y.data(), N, x.data(), K, 1, W.data(), 1, K, M, N, K);
  cpu::gemm_acc_lowp(GemmPrecision::BF16, LowpPath::Auto, dx2.data(), K, dy.data(), N, 1, W.data(), K, 1, M, K, N);
  cpu::gemm_acc_lowp(GemmPrecision::BF16, LowpPath::Auto, dW2.data(), K, dy.data(), 1, N, x.data(), K, 1, N, K, M);
  EXPECT_EQ(y16, y);
  EXPECT_EQ(dx, dx2);
  EXPECT_EQ(dW, dW2);
  double diff = 0;  // and bf16 is close to, but not, fp32
  for (size_t i = 0; i < y.size(); i++) diff = std::max(diff, double(std::fabs(y16[i] - y32[i])));
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, 0.5);
  std::vector<float> again(size_t(M) * N);
  cpu::matmul_forward_train(again.data(), x.data(), W.data(), bias.data(), M, K, N);
  EXPECT_EQ(again, y32) << "F32 again after the scope";
}

// COut::Overwrite / OverwriteCold: C = bias + A·B over whatever C held (NaN here) is bit-identical
// to C += A·B on a C filled with the bias (or zeroed) — on every path, with whole aligned tiles
// (Cold: streamed out), ragged edges, and more than one K slice (K > 768 for vdpbf16ps).
TEST(TrainGemmLowp, OverwriteEqualsAccumulatingIntoTheBias) {
  for (GemmPrecision prec : {GemmPrecision::BF16, GemmPrecision::F16})
    for (LowpPath path : paths(prec))
      for (cpu::COut out : {cpu::COut::Overwrite, cpu::COut::OverwriteCold})
        for (bool with_bias : {false, true})
          for (auto [M, N, K] : {std::tuple{64, 128, 256}, std::tuple{13, 70, 33}, std::tuple{24, 64, 1700}}) {
            SCOPED_TRACE(testing::Message() << "prec=" << int(prec) << " path=" << int(path) << " out=" << int(out)
                                            << " bias=" << with_bias << " M=" << M << " N=" << N << " K=" << K);
            const std::vector<float> A = randf(size_t(K) * M, 7), B = randf(size_t(K) * N, 8), bias = randf(N, 9);
            const float* b = with_bias ? bias.data() : nullptr;
            // C 64-byte aligned so that whole tiles can take the streaming stores
            std::vector<float> rbuf(size_t(M) * N + 16), obuf(size_t(M) * N + 16, std::nanf(""));
            float* ref = cpu::test::align64(rbuf.data());
            float* over = cpu::test::align64(obuf.data());
            for (int i = 0; i < M; i++)
              for (int j = 0; j < N; j++) ref[size_t(i) * N + j] = b ? b[j] : 0.0f;
            // A read transposed (as dyᵀ is), B row-major (as x is)
            cpu::gemm_acc_lowp(prec, path, ref, N, A.data(), 1, M, B.data(), N, 1, M, N, K);
            cpu::gemm_acc_lowp(prec, path, over, N, A.data(), 1, M, B.data(), N, 1, M, N, K, out, b);
            EXPECT_EQ(0, std::memcmp(ref, over, size_t(M) * N * sizeof(float)));
          }
}
