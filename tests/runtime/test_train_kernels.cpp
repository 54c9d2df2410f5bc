// runtime/cpu/train_kernels: the linear layer's gradients against plain double loops, across the
// chunk boundary of the output dimension, accumulating into what is already there, and
// bit-identical for 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_kernels.h"
#include "kernel_test_util.h"

using namespace orion;

namespace {
std::vector<float> randf(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Grads {
  std::vector<float> dx, dW, db;
};

// dx += dy·W, dW += dyᵀ·x, db += Σ dy, starting from `init` everywhere.
Grads run(const std::vector<float>& dy, const std::vector<float>& x, const std::vector<float>& W, int M, int K, int N,
          float init) {
  Grads g{std::vector<float>(size_t(M) * K, init), std::vector<float>(size_t(N) * K, init),
          std::vector<float>(size_t(N), init)};
  cpu::matmul_backward_input(g.dx.data(), dy.data(), W.data(), M, K, N);
  cpu::matmul_backward_weight(g.dW.data(), dy.data(), x.data(), M, K, N);
  cpu::bias_backward(g.db.data(), dy.data(), M, N);
  return g;
}

void shape_case(int M, int K, int N) {
  SCOPED_TRACE(testing::Message() << "M=" << M << " K=" << K << " N=" << N);
  auto dy = randf(size_t(M) * N, 1), x = randf(size_t(M) * K, 2), W = randf(size_t(N) * K, 3);
  const float init = 0.5f;
  Grads g = run(dy, x, W, M, K, N, init);
  double worst = 0;
  for (int m = 0; m < M; m++)
    for (int k = 0; k < K; k++) {
      double s = init;
      for (int n = 0; n < N; n++) s += double(dy[size_t(m) * N + n]) * W[size_t(n) * K + k];
      worst = std::max(worst, std::abs(g.dx[size_t(m) * K + k] - s) / std::max(1.0, std::abs(s)));
    }
  for (int n = 0; n < N; n++) {
    double sb = init;
    for (int m = 0; m < M; m++) sb += dy[size_t(m) * N + n];
    worst = std::max(worst, std::abs(g.db[size_t(n)] - sb) / std::max(1.0, std::abs(sb)));
    for (int k = 0; k < K; k++) {
      double s = init;
      for (int m = 0; m < M; m++) s += double(dy[size_t(m) * N + n]) * x[size_t(m) * K + k];
      worst = std::max(worst, std::abs(g.dW[size_t(n) * K + k] - s) / std::max(1.0, std::abs(s)));
    }
  }
  EXPECT_LT(worst, 2e-5);
}
}  // namespace

TEST(TrainKernels, Transpose) {
  const int R = 37, Cc = 70;
  auto a = randf(size_t(R) * Cc, 4);
  std::vector<float> t(a.size());
  cpu::transpose(t.data(), a.data(), R, Cc);
  for (int r = 0; r < R; r++)
    for (int c = 0; c < Cc; c++) ASSERT_EQ(t[size_t(c) * R + r], a[size_t(r) * Cc + c]);
}

TEST(TrainKernels, MatmulBackwardMatchesNaive) {
  shape_case(1, 5, 3);                        // one token (the matvec path)
  shape_case(7, 33, 21);                      // odd sizes
  shape_case(16, 24, cpu::kTrainChunk + 77);  // the output dimension split into two chunks
  shape_case(50, 70, 300);                    // dx: two K slices (256 + 44) and 25+ rows per thread (B blocks packed)
  shape_case(60, 300, 130);                   // dx packed with a partial 64-column panel
}

// y = x·Wᵀ + b gives the same bits for any number of token rows: 400 rows at once (C split by row
// tiles between the threads) equal 25 calls of 16 rows (few row tiles: C split by column panels),
// on every gemm_acc path, and both match a double loop.
TEST(TrainKernels, ForwardBitIdenticalForFewAndManyRows) {
  if (!cpu::gemm_acc_available()) GTEST_SKIP() << "the portable path is cpu::matmul";
  const cpu::Isa was = cpu::active_isa();
  const int M = 400, K = 64, N = 256, chunk = 16;
  auto x = randf(size_t(M) * K, 8), W = randf(size_t(N) * K, 9), b = randf(size_t(N), 10);
  for (cpu::Isa isa : {cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (!cpu::set_isa(isa)) continue;
    SCOPED_TRACE(cpu::isa_name(isa));
    std::vector<float> many(size_t(M) * N), few(size_t(M) * N);
    cpu::matmul_forward_train(many.data(), x.data(), W.data(), b.data(), M, K, N);
    for (int m0 = 0; m0 < M; m0 += chunk)
      cpu::matmul_forward_train(few.data() + size_t(m0) * N, x.data() + size_t(m0) * K, W.data(), b.data(), chunk, K, N);
    EXPECT_EQ(many, few);
    double worst = 0;
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++) {
        double s = b[size_t(n)];
        for (int k = 0; k < K; k++) s += double(x[size_t(m) * K + k]) * W[size_t(n) * K + k];
        worst = std::max(worst, std::abs(many[size_t(m) * N + n] - s) / std::max(1.0, std::abs(s)));
      }
    EXPECT_LT(worst, 2e-5);
  }
  cpu::set_isa(was);
}

TEST(TrainKernels, OneAndTwoThreadsBitIdentical) {
  const int M = 96, K = 160, N = cpu::kTrainChunk + 200;
  auto dy = randf(size_t(M) * N, 5), x = randf(size_t(M) * K, 6), W = randf(size_t(N) * K, 7);
  cpu::set_num_threads(1);
  Grads a = run(dy, x, W, M, K, N, 0.0f);
  cpu::set_num_threads(2);
  Grads b = run(dy, x, W, M, K, N, 0.0f);
  cpu::set_num_threads(0);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.dW, b.dW);
  EXPECT_EQ(a.db, b.db);
}

// dW with COut::Overwrite* (its zeroing left to this first write, train/cpu/first_write_zero.h):
// the same bits as accumulating into a zeroed dW, C's old contents (NaN here) never read — with
// aligned rows (whole tiles streamed out), ragged ones, and two K slices (M > 256 tokens).
TEST(TrainKernels, WeightGradientOverwriteEqualsAccumulatingIntoZeros) {
  for (auto [M, K, N] : {std::tuple{256, 128, 130}, std::tuple{300, 70, 64}, std::tuple{5, 33, 7}}) {
    SCOPED_TRACE(testing::Message() << "M=" << M << " K=" << K << " N=" << N);
    const std::vector<float> dy = randf(size_t(M) * N, 11), x = randf(size_t(M) * K, 12);
    std::vector<float> zbuf(size_t(N) * K + 16, 0.0f), gbuf(size_t(N) * K + 16, std::nanf(""));
    float* zeroed = cpu::test::align64(zbuf.data());
    float* garbage = cpu::test::align64(gbuf.data());
    cpu::matmul_backward_weight(zeroed, dy.data(), x.data(), M, K, N);
    for (cpu::COut out : {cpu::COut::Overwrite, cpu::COut::OverwriteCold}) {
      std::fill(gbuf.begin(), gbuf.end(), std::nanf(""));
      cpu::matmul_backward_weight(garbage, dy.data(), x.data(), M, K, N, out);
      EXPECT_EQ(0, std::memcmp(zeroed, garbage, size_t(N) * K * sizeof(float))) << "out=" << int(out);
    }
  }
}

// gemm_acc's AVX2 tile (6 × 16) and AVX-512 tile (6 × 64) compute every element as the same FMA
// chain, so all three products of a linear layer give the same bits on both paths — full and
// ragged column tiles, packed and unpacked B, two K slices, accumulating and overwriting; the
// forward's blocks of Wᵀ packed by each path's own transposes (16 × 16, 8 × 8); C split by panels
// with two column blocks and two K slices each (40 × 1100, K 300) and by rows.
TEST(TrainKernels, Avx2AndAvx512ProductsBitIdentical) {
  const cpu::Isa was = cpu::active_isa();
  if (!cpu::set_isa(cpu::Isa::Avx512) || !cpu::set_isa(cpu::Isa::Avx2)) {
    cpu::set_isa(was);
    GTEST_SKIP() << "needs a CPU with AVX-512 to run both tiles";
  }
  for (auto [M, K, N] : {std::tuple{64, 96, 300}, std::tuple{300, 70, 64}, std::tuple{17, 33, 40}, std::tuple{96, 768, 130},
                        std::tuple{40, 300, 1100}, std::tuple{400, 300, 1100}}) {
    SCOPED_TRACE(testing::Message() << "M=" << M << " K=" << K << " N=" << N);
    const auto dy = randf(size_t(M) * N, 21), x = randf(size_t(M) * K, 22), W = randf(size_t(N) * K, 23),
               b = randf(size_t(N), 24);
    std::vector<float> y[2], dx[2], dW[2], dW_over[2];
    int i = 0;
    for (cpu::Isa isa : {cpu::Isa::Avx2, cpu::Isa::Avx512}) {
      ASSERT_TRUE(cpu::set_isa(isa));
      y[i].assign(size_t(M) * N, 0.0f), dx[i].assign(size_t(M) * K, 0.25f), dW[i].assign(size_t(N) * K, 0.5f);
      dW_over[i].assign(size_t(N) * K, std::nanf(""));
      cpu::matmul_forward_train(y[i].data(), x.data(), W.data(), b.data(), M, K, N);
      cpu::matmul_backward_input(dx[i].data(), dy.data(), W.data(), M, K, N);
      cpu::matmul_backward_weight(dW[i].data(), dy.data(), x.data(), M, K, N);
      cpu::matmul_backward_weight(dW_over[i].data(), dy.data(), x.data(), M, K, N, cpu::COut::Overwrite);
      i++;
    }
    EXPECT_EQ(y[0], y[1]);
    EXPECT_EQ(dx[0], dx[1]);
    EXPECT_EQ(dW[0], dW[1]);
    EXPECT_EQ(dW_over[0], dW_over[1]);
  }
  cpu::set_isa(was);
}
