// runtime/cpu/bf16_weight_packs: a weight packed once after its update gives the products the same
// bits as packing it in each product; the layouts against a plain loop over f32_to_bf16; packs exist
// only in a scope, at bf16 precision, for noted weights inside the refreshed range, and are
// dropped by a precision change or drop_weight_packs().
#include "runtime/cpu/bf16_weight_packs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "kernel_test_util.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_kernels.h"

using namespace orion;
using cpu::GemmPrecision;
using cpu::KeptLayout;

namespace {

std::vector<float> randf(size_t n, uint32_t seed) { return cpu::test::random_floats(n, seed, -2, 2); }

class Bf16WeightPacks : public testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::bf16_dot_available()) GTEST_SKIP() << "no AVX512-BF16 (vdpbf16ps) on this CPU: packs are never kept";
  }
};

uint32_t pair_word(float lo, float hi) { return uint32_t(f32_to_bf16(lo)) | uint32_t(f32_to_bf16(hi)) << 16; }

}  // namespace

// Rows: word (n/64·⌈K/2⌉ + k/2)·64 + n%64 = (W[n, k], W[n, k+1]); Cols: (k/64·⌈N/2⌉ + n/2)·64 + k%64 =
// (W[n, k], W[n+1, k]); zero past N and K. Odd sizes, not multiples of 64 or 16.
TEST_F(Bf16WeightPacks, LayoutsAreThePairsOfRoundedWeights) {
  for (auto nk : {std::pair{131, 77}, std::pair{64, 32}, std::pair{5, 3}, std::pair{200, 160}}) {
    const int N = nk.first, K = nk.second;  // (not a structured binding: clang 14 cannot capture one)
    SCOPED_TRACE(testing::Message() << "N=" << N << " K=" << K);
    const std::vector<float> W = randf(size_t(N) * K, 1 + N);
    std::vector<uint32_t> rows(cpu::kept_pack_words(N, K, KeptLayout::Rows), 7u),
        cols(cpu::kept_pack_words(N, K, KeptLayout::Cols), 7u);
    cpu::pack_weight_bf16(W.data(), N, K, rows.data(), cols.data());
    auto w = [&](int n, int k) { return n < N && k < K ? W[size_t(n) * K + k] : 0.0f; };
    const int kqK = (K + 1) / 2, kqN = (N + 1) / 2, pn = (N + 63) / 64, pk = (K + 63) / 64;
    ASSERT_EQ(rows.size(), size_t(pn) * kqK * 64);
    ASSERT_EQ(cols.size(), size_t(pk) * kqN * 64);
    for (int n = 0; n < pn * 64; n++)
      for (int q = 0; q < kqK; q++)
        ASSERT_EQ(rows[(size_t(n / 64) * kqK + q) * 64 + n % 64], pair_word(w(n, 2 * q), w(n, 2 * q + 1))) << n << " " << q;
    for (int k = 0; k < pk * 64; k++)
      for (int q = 0; q < kqN; q++)
        ASSERT_EQ(cols[(size_t(k / 64) * kqN + q) * 64 + k % 64], pair_word(w(2 * q, k), w(2 * q + 1, k))) << k << " " << q;
  }
}

// y = x·Wᵀ and dx = dy·W through a kept pack equal the products that pack W themselves, bit for bit.
TEST_F(Bf16WeightPacks, ProductsWithKeptPacksEqualProductsThatPack) {
  const cpu::ScopedGemmPrecision bf16(GemmPrecision::BF16);
  const int M = 37, K = 77, N = 131;
  const std::vector<float> x = randf(size_t(M) * K, 2), W = randf(size_t(N) * K, 3), dy = randf(size_t(M) * N, 4),
                           bias = randf(N, 5);
  std::vector<float> y0(size_t(M) * N), dx0(size_t(M) * K, 0.5f);
  cpu::matmul_forward_train(y0.data(), x.data(), W.data(), bias.data(), M, K, N);  // no scope: packs W itself
  cpu::matmul_backward_input(dx0.data(), dy.data(), W.data(), M, K, N);
  EXPECT_EQ(cpu::kept_weight_pack(W.data(), N, K, KeptLayout::Rows), nullptr) << "outside a scope";

  const cpu::ScopedBf16WeightPacks scope;
  ASSERT_TRUE(cpu::weight_packs_active());
  std::vector<float> y1(y0.size()), dx1(dx0.size(), 0.5f);
  cpu::matmul_forward_train(y1.data(), x.data(), W.data(), bias.data(), M, K, N);  // notes W
  EXPECT_EQ(cpu::kept_weight_pack(W.data(), N, K, KeptLayout::Rows), nullptr) << "noted, not yet refreshed";
  cpu::refresh_weight_packs(W.data(), W.size());
  ASSERT_NE(cpu::kept_weight_pack(W.data(), N, K, KeptLayout::Rows), nullptr);
  ASSERT_NE(cpu::kept_weight_pack(W.data(), N, K, KeptLayout::Cols), nullptr);
  EXPECT_GT(cpu::weight_pack_bytes(), 0u);
  cpu::matmul_forward_train(y1.data(), x.data(), W.data(), bias.data(), M, K, N);
  cpu::matmul_backward_input(dx1.data(), dy.data(), W.data(), M, K, N);
  EXPECT_EQ(y1, y0);
  EXPECT_EQ(dx1, dx0);
}

TEST_F(Bf16WeightPacks, OnlyNotedWeightsInsideTheRangeAtBf16AreKept) {
  const int N = 70, K = 40;
  std::vector<float> buf(3 * size_t(N) * K);
  for (size_t i = 0; i < buf.size(); i++) buf[i] = float(i % 97) * 0.01f;
  const float* a = buf.data();                  // noted, inside
  const float* b = buf.data() + size_t(N) * K;  // not noted
  const cpu::ScopedBf16WeightPacks scope;
  {
    const cpu::ScopedGemmPrecision f32(GemmPrecision::F32);
    cpu::note_weight(a, N, K);
    cpu::refresh_weight_packs(buf.data(), buf.size());
    EXPECT_EQ(cpu::kept_weight_pack(a, N, K, KeptLayout::Rows), nullptr) << "fp32 keeps none";
  }
  const cpu::ScopedGemmPrecision bf16(GemmPrecision::BF16);
  cpu::note_weight(a, N, K);
  cpu::refresh_weight_packs(buf.data() + 1, buf.size() - 1);  // a starts before the range
  EXPECT_EQ(cpu::kept_weight_pack(a, N, K, KeptLayout::Rows), nullptr) << "outside the refreshed range";
  cpu::refresh_weight_packs(buf.data(), buf.size());
  EXPECT_NE(cpu::kept_weight_pack(a, N, K, KeptLayout::Rows), nullptr);
  EXPECT_EQ(cpu::kept_weight_pack(a, N, K + 1, KeptLayout::Rows), nullptr) << "another shape";
  EXPECT_EQ(cpu::kept_weight_pack(b, N, K, KeptLayout::Rows), nullptr) << "never noted";
  cpu::drop_weight_packs();
  EXPECT_EQ(cpu::kept_weight_pack(a, N, K, KeptLayout::Rows), nullptr) << "dropped";
  cpu::note_weight(a, N, K);
  cpu::refresh_weight_packs(buf.data(), buf.size());
  ASSERT_NE(cpu::kept_weight_pack(a, N, K, KeptLayout::Rows), nullptr);
  cpu::set_train_gemm_precision(GemmPrecision::F16);  // (the scope above restores BF16, then F32)
  cpu::set_train_gemm_precision(GemmPrecision::BF16);
  EXPECT_EQ(cpu::kept_weight_pack(a, N, K, KeptLayout::Rows), nullptr) << "a precision change drops the packs";
}

TEST_F(Bf16WeightPacks, AStalePackIsCaughtWhenVerifying) {
  setenv("ORION_VERIFY_WEIGHT_PACKS", "1", 1);  // read once, on first use in this process
  const cpu::ScopedGemmPrecision bf16(GemmPrecision::BF16);
  const cpu::ScopedBf16WeightPacks scope;
  const int N = 20, K = 30;
  std::vector<float> W = randf(size_t(N) * K, 9);
  cpu::note_weight(W.data(), N, K);
  cpu::refresh_weight_packs(W.data(), W.size());
  EXPECT_NE(cpu::kept_weight_pack(W.data(), N, K, KeptLayout::Cols), nullptr);
  W[5] += 1.0f;  // changed without a refresh
  try {
    cpu::kept_weight_pack(W.data(), N, K, KeptLayout::Cols);
    ADD_FAILURE() << "a stale pack was handed out";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stale"), std::string::npos) << e.what();
  }
}

// AdamW repacks blocks of 16 rows right after updating them (repack_updated_rows): rows updated and
// repacked that way give the packs a fresh full pack gives; a range that does not start a block
// packs nothing; the next refresh skips a weight whose every row was repacked, and packs the others.
TEST_F(Bf16WeightPacks, RowsRepackedAfterTheirUpdateEqualAFreshPack) {
  unsetenv("ORION_VERIFY_WEIGHT_PACKS");  // the skipped refresh below leaves a pack stale on purpose
  const cpu::ScopedGemmPrecision bf16(GemmPrecision::BF16);
  const cpu::ScopedBf16WeightPacks scope;
  const int N = 70, K = 48;  // 4 blocks of 16 rows and 6 last rows
  std::vector<float> W = randf(size_t(N) * K, 21);
  auto fresh = [&](KeptLayout layout) {
    std::vector<uint32_t> rows(cpu::kept_pack_words(N, K, KeptLayout::Rows)), cols(cpu::kept_pack_words(N, K, KeptLayout::Cols));
    cpu::pack_weight_bf16(W.data(), N, K, rows.data(), cols.data());
    return layout == KeptLayout::Rows ? rows : cols;
  };
  auto kept = [&](KeptLayout layout) {
    const uint32_t* p = cpu::kept_weight_pack(W.data(), N, K, layout);
    EXPECT_NE(p, nullptr);
    return p ? std::vector<uint32_t>(p, p + cpu::kept_pack_words(N, K, layout)) : std::vector<uint32_t>{};
  };
  cpu::note_weight(W.data(), N, K);
  cpu::refresh_weight_packs(W.data(), W.size());
  // An "update" in chunks of 32 rows, then 6: each chunk repacked right after.
  for (int r0 = 0; r0 < N; r0 += 32) {
    const int r1 = std::min(N, r0 + 32);
    for (size_t i = size_t(r0) * K; i < size_t(r1) * K; i++) W[i] = W[i] * 0.5f + 0.25f;
    cpu::repack_updated_rows(W.data() + size_t(r0) * K, size_t(r1 - r0) * K);
  }
  EXPECT_EQ(kept(KeptLayout::Rows), fresh(KeptLayout::Rows));
  EXPECT_EQ(kept(KeptLayout::Cols), fresh(KeptLayout::Cols));
  const std::vector<uint32_t> before = kept(KeptLayout::Rows);
  W[3] += 1.0f;  // (a change no one reports: only to see whether the refresh repacks)
  cpu::refresh_weight_packs(W.data(), W.size());
  EXPECT_EQ(kept(KeptLayout::Rows), before) << "every row was repacked after its update: the refresh skips the weight";
  cpu::repack_updated_rows(W.data() + 5, size_t(16) * K);  // not the start of a block of 16 rows: nothing
  EXPECT_EQ(kept(KeptLayout::Rows), before);
  cpu::refresh_weight_packs(W.data(), W.size());  // none repacked since the last refresh: a full pack
  EXPECT_EQ(kept(KeptLayout::Rows), fresh(KeptLayout::Rows));
  EXPECT_EQ(kept(KeptLayout::Cols), fresh(KeptLayout::Cols));
}
