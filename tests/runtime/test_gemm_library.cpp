// The prompt GEMM paths of matmul(): oneDNN's sgemm (when built in) for M ≥ kLibraryGemmMinRows,
// Orion's register tiles otherwise — each against a naive reference, each independent of the
// thread count, and the rows that must stay bit-identical to decode (short products, Orion's path)
// checked bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "kernel_test_util.h"
#include "runtime/cpu/kernels.h"

namespace orion::cpu {
namespace {

using test::random_floats;

struct RestoreGemm {
  PrefillGemm gemm = prefill_gemm();
  int threads = num_threads();
  ~RestoreGemm() { set_prefill_gemm(gemm), set_num_threads(threads); }
};

// W [N, K] stored in dt, and the fp32 values it holds.
struct StoredWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> f32;
};

StoredWeights stored(DType dt, size_t n, uint32_t seed) {
  StoredWeights w{std::vector<uint8_t>(n * dtype_size(dt)), random_floats(n, seed)};
  for (size_t i = 0; i < n; i++) {
    if (dt == DType::F32) std::memcpy(&w.bytes[i * 4], &w.f32[i], 4);
    else {
      const uint16_t h = dt == DType::F16 ? f32_to_f16(w.f32[i]) : f32_to_bf16(w.f32[i]);
      std::memcpy(&w.bytes[i * 2], &h, 2);
      w.f32[i] = dt == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return w;
}

// y[m, n] = Σ_k x[m, k]·W[n, k] + bias[n] in double, and Σ|terms| (the scale of fp32 rounding).
void reference(std::vector<double>& y, std::vector<double>& mag, const std::vector<float>& x,
               const std::vector<float>& W, const std::vector<float>& b, int M, int K, int N) {
  y.assign(size_t(M) * N, 0), mag.assign(size_t(M) * N, 0);
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double s = b[n], a = std::fabs(b[n]);
      for (int k = 0; k < K; k++) {
        const double p = double(x[size_t(m) * K + k]) * W[size_t(n) * K + k];
        s += p, a += std::fabs(p);
      }
      y[size_t(m) * N + n] = s, mag[size_t(m) * N + n] = a;
    }
}

std::vector<PrefillGemm> built_paths() {
  std::vector<PrefillGemm> out{PrefillGemm::Orion};
  if (prefill_gemm_available(PrefillGemm::OneDnn)) out.push_back(PrefillGemm::OneDnn);
  return out;
}

TEST(GemmLibrary, EachPathMatchesTheReferenceOnPromptShapes) {
  RestoreGemm restore;
  struct Shape {
    int M, K, N;
  };
  const Shape shapes[] = {{64, 100, 67}, {65, 773, 131}, {200, 768, 517}, {kLibraryGemmMinRows - 1, 96, 40}};
  for (PrefillGemm g : built_paths()) {
    ASSERT_TRUE(set_prefill_gemm(g));
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (const Shape& s : shapes) {
        const StoredWeights W = stored(dt, size_t(s.N) * s.K, uint32_t(s.K + s.N));
        const std::vector<float> x = random_floats(size_t(s.M) * s.K, 2), b = random_floats(size_t(s.N), 3);
        std::vector<float> y(size_t(s.M) * s.N, NAN);
        matmul(y.data(), x.data(), W.bytes.data(), dt, b.data(), s.M, s.K, s.N);
        std::vector<double> ref, mag;
        reference(ref, mag, x, W.f32, b, s.M, s.K, s.N);
        for (size_t i = 0; i < y.size(); i++)
          ASSERT_NEAR(y[i], ref[i], 1e-5 * mag[i] + 1e-30)
              << prefill_gemm_name(g) << " " << dtype_name(dt) << " M=" << s.M << " K=" << s.K << " i=" << i;
      }
  }
}

// Greedy text must not depend on the thread count: neither path may change a bit between 1 and 2.
TEST(GemmLibrary, EachPathBitIdenticalForOneAndTwoThreads) {
  RestoreGemm restore;
  const int M = 130, K = 768, N = 1000;
  for (PrefillGemm g : built_paths()) {
    ASSERT_TRUE(set_prefill_gemm(g));
    for (DType dt : {DType::F32, DType::BF16}) {
      const StoredWeights W = stored(dt, size_t(N) * K, 5);
      const std::vector<float> x = random_floats(size_t(M) * K, 6), b = random_floats(size_t(N), 7);
      std::vector<float> y1(size_t(M) * N), y2(y1.size());
      set_num_threads(1);
      matmul(y1.data(), x.data(), W.bytes.data(), dt, b.data(), M, K, N);
      set_num_threads(2);
      matmul(y2.data(), x.data(), W.bytes.data(), dt, b.data(), M, K, N);
      EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0) << prefill_gemm_name(g) << " " << dtype_name(dt);
    }
  }
}

// Rows that must equal decode bit for bit: every prompt row on Orion's path, and every product
// shorter than kLibraryGemmMinRows (a batched decode step) whichever path is chosen.
TEST(GemmLibrary, OrionPathAndShortProductsEqualDecodeBitForBit) {
  RestoreGemm restore;
  const int K = 300, N = 70;
  const StoredWeights W = stored(DType::F16, size_t(N) * K, 8);
  for (PrefillGemm g : built_paths()) {
    ASSERT_TRUE(set_prefill_gemm(g));
    for (int M : {kLibraryGemmMinRows - 1, kLibraryGemmMinRows + 3}) {
      if (g == PrefillGemm::OneDnn && M >= kLibraryGemmMinRows) continue;  // the library's own order
      const std::vector<float> x = random_floats(size_t(M) * K, 9);
      std::vector<float> yp(size_t(M) * N), yd(yp.size());
      matmul(yp.data(), x.data(), W.bytes.data(), DType::F16, nullptr, M, K, N);
      for (int m = 0; m < M; m++)
        matmul(yd.data() + size_t(m) * N, x.data() + size_t(m) * K, W.bytes.data(), DType::F16, nullptr, 1, K, N);
      EXPECT_EQ(std::memcmp(yp.data(), yd.data(), yp.size() * 4), 0) << prefill_gemm_name(g) << " M=" << M;
    }
  }
}

TEST(GemmLibrary, ChoosingAPathThatIsNotBuiltIsRefused) {
  RestoreGemm restore;
  EXPECT_TRUE(set_prefill_gemm(PrefillGemm::Orion));
  EXPECT_EQ(prefill_gemm(), PrefillGemm::Orion);
  EXPECT_EQ(set_prefill_gemm(PrefillGemm::OneDnn), prefill_gemm_available(PrefillGemm::OneDnn));
  if (!prefill_gemm_available(PrefillGemm::OneDnn)) EXPECT_EQ(prefill_gemm(), PrefillGemm::Orion);
}

TEST(GemmLibrary, PeakMeasuresEachBuiltPathAndKeepsTheBest) {
  const GemmPeak p = measure_gemm_peak(64, 256, 256, 2);
  EXPECT_GT(p.orion_flops, 0);
  EXPECT_EQ(p.library_flops > 0, prefill_gemm_available(PrefillGemm::OneDnn));
  EXPECT_EQ(p.best_flops, std::max(p.orion_flops, p.library_flops));
  EXPECT_EQ(p.q8_flops, 0);
  const GemmPeak q = measure_gemm_peak(64, 256, 256, 2, /*with_q8=*/true);  // q8_0 weights: their int8 kernels too
  EXPECT_GT(q.q8_flops, 0);
  EXPECT_EQ(q.best_flops, std::max({q.orion_flops, q.library_flops, q.q8_flops}));
}

}  // namespace
}  // namespace orion::cpu
