// Prompt-sized matrix products through a GEMM library: oneDNN's sgemm, when the build found it
// (ORION_HAVE_ONEDNN). It picks AMX, AVX-512 or AVX2 code at run time and reaches a higher GEMM
// peak than Orion's register tiles, so `orion bench generate` measures the prefill bound with it;
// whether it also makes prompts faster end to end is measured per machine (bench/RESULTS.md,
// "Prefill"). Its kernels sum each element in their own order, so rows computed here are not
// bit-identical to the decode matvec: matmul() uses it only when chosen and only for
// M ≥ kLibraryGemmMinRows (prompts), never for decode or a batched decode step.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/cpu/kernels_impl.h"

#if ORION_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace orion::cpu {

namespace {

#if ORION_HAVE_ONEDNN
constexpr bool kHaveLibrary = true;
#else
constexpr bool kHaveLibrary = false;
#endif

// ORION_GEMM=onednn at start-up chooses the library (when built in); Orion's kernels by default:
// measured end to end, a Stories110M prompt is no faster through oneDNN on the AVX-512 machine
// (bench/RESULTS.md, "Prefill"), and Orion's rows stay bit-identical to decode.
PrefillGemm initial_choice() {
  const char* env = std::getenv("ORION_GEMM");
  return kHaveLibrary && env && std::string(env) == "onednn" ? PrefillGemm::OneDnn : PrefillGemm::Orion;
}

PrefillGemm g_choice = initial_choice();

#if ORION_HAVE_ONEDNN
constexpr size_t kLibraryPanelBytes = 4u << 20;

// y[:, p0:p1] = x · W[p0:p1, :]ᵀ (+ bias) on the calling thread, one L2-sized panel of weight rows
// at a time (f16/bf16 rows widened to fp32 into `panel` first; f32 rows are used where they lie).
//   x: [M, K];  W: [N, K] in dtype wt;  y: [M, N] (row stride N)
void library_rows(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N, int n0,
                  int n1, int panel_rows_max, std::vector<float>& panel) {
  const IsaKernels& ker = isa_kernels();
  for (int p = n0; p < n1; p += panel_rows_max) {
    const int rows = std::min(panel_rows_max, n1 - p);
    const float* w = static_cast<const float*>(W) + size_t(p) * K;
    if (wt != DType::F32) {
      ker.to_f32(panel.data(), static_cast<const uint8_t*>(W) + size_t(p) * K * dtype_size(wt), wt, size_t(rows) * K);
      w = panel.data();
    }
    // Row-major y = x·wᵀ: oneDNN's sgemm is row-major with (transa, transb) = (N, T).
    dnnl_sgemm('N', 'T', M, rows, K, 1.0f, x, K, w, K, 0.0f, y + p, N);
    if (bias)
      for (int m = 0; m < M; m++)
        for (int j = 0; j < rows; j++) y[size_t(m) * N + p + j] += bias[p + j];
  }
}
#endif

}  // namespace

bool prefill_gemm_available(PrefillGemm g) { return g == PrefillGemm::Orion || kHaveLibrary; }

bool set_prefill_gemm(PrefillGemm g) {
  if (!prefill_gemm_available(g)) return false;
  g_choice = g;
  return true;
}

PrefillGemm prefill_gemm() { return g_choice; }

const char* prefill_gemm_name(PrefillGemm g) { return g == PrefillGemm::OneDnn ? "onednn" : "orion"; }

bool use_library_gemm(DType wt, int M) {
  return g_choice == PrefillGemm::OneDnn && wt != DType::Q8_0 && M >= kLibraryGemmMinRows;
}

// Each thread takes a contiguous range of weight rows (as matmul_prefill does) and calls the library
// on it single-threaded (a call inside an OpenMP region runs on the calling thread), so the bits of
// y do not depend on the thread count.
void matmul_library(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N) {
#if ORION_HAVE_ONEDNN
  // The library packs x again on every call, so it gets wide panels: all of a thread's rows for
  // f32 weights, up to kLibraryPanelBytes of widened rows otherwise.
  const int step = 16, tiles = (N + step - 1) / step;
  const int panel = wt == DType::F32 ? N : std::max(step, int(kLibraryPanelBytes / (size_t(K) * 4)) / step * step);
#pragma omp parallel
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int n0 = std::min(N, tiles * t / nt * step), n1 = std::min(N, tiles * (t + 1) / nt * step);
    std::vector<float> scratch(wt == DType::F32 ? 0 : size_t(panel) * K);
    if (n0 < n1) library_rows(y, x, W, wt, bias, M, K, N, n0, n1, panel, scratch);
  }
#else
  matmul_prefill(y, x, W, wt, bias, M, K, N);
#endif
}

// The best GEMM rate of this machine, measured now with all threads on one prompt-shaped product
// y[M, N] = x[M, K]·W[N, K]ᵀ through each available path; the fastest one counts.
GemmPeak measure_gemm_peak(int M, int K, int N, int reps, bool with_q8) {
  std::vector<float> x(size_t(M) * K), W(size_t(N) * K), y(size_t(M) * N);
  for (size_t i = 0; i < x.size(); i++) x[i] = float(int(i % 17) - 8) / 16;
  for (size_t i = 0; i < W.size(); i++) W[i] = float(int(i % 13) - 6) / 32;
  const double flops = 2.0 * M * K * N;
  auto best_rate = [&](auto&& run) {
    double best = 1e30;
    run();  // warm-up: pages touched, threads started
    for (int r = 0; r < reps; r++) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return flops / best;
  };
  GemmPeak peak;
  peak.orion_flops = best_rate([&] { matmul_prefill(y.data(), x.data(), W.data(), DType::F32, nullptr, M, K, N); });
  if (kHaveLibrary)
    peak.library_flops = best_rate([&] { matmul_library(y.data(), x.data(), W.data(), DType::F32, nullptr, M, K, N); });
  if (with_q8 && K % 32 == 0) {  // the same W as q8_0 blocks
    std::vector<BlockQ8_0> Wq(W.size() / 32);
    quantize_q8_0(W.data(), Wq.data(), W.size());
    peak.q8_flops = best_rate([&] { matmul_prefill(y.data(), x.data(), Wq.data(), DType::Q8_0, nullptr, M, K, N); });
  }
  peak.best_flops = std::max({peak.orion_flops, peak.library_flops, peak.q8_flops});
  return peak;
}

}  // namespace orion::cpu
