// Prefill matmul (M > 1 tokens at once): y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias).
//
// Compute-bound: each weight row is used by all M tokens. The register-tiled kernels of the ISA
// files do the arithmetic; this file splits the N weight rows into one contiguous range per thread,
// so every thread reads its own part of W once and all of x (which stays in its L2 cache).
//
// Why not OpenBLAS's sgemm: measured on this machine (Debian's OpenBLAS 0.3.21), it
//  - does not recognise the CPU and falls back to its "Prescott" SSE3 kernels (13–31 GFLOPS on
//    one core against ~100 for its own SkylakeX kernels, which need OPENBLAS_CORETYPE set before
//    the library loads), and
//  - changes the bits of y between 1 and 2 threads for 305 of the 484 shapes we tried
//    (M 2–256, K 64–3072, N 256–2048; still 84 with the SkylakeX kernels), which would break
//    greedy generation being identical across thread counts.
// Our kernels sum each element in one fixed order (the same as the decode matvec), so y is the
// same for any thread count and the same whether a token is processed in prefill or decode.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "base/line_aligned.h"
#include "runtime/cpu/kernels_impl.h"
#include "runtime/cpu/kernels_q8.h"
#include "runtime/cpu/work_shares.h"

namespace orion::cpu {

// Weight rows per panel: as many fp32 rows as fit in kPanelBytes (a quarter of a 1 MB L2), in
// multiples of the kernel's row step. Each tile of tokens sweeps a whole panel while its x rows sit
// in L1, so a panel is read from L2 once per tile instead of from memory.
constexpr size_t kPanelBytes = 256u << 10;

// The calling thread's panel widened to fp32: at least n floats, kept for the thread's next call (a
// fresh 256 KB vector per call was an mmap, 64 page faults and an munmap for every product of every
// decode step of a batch). On a 64-byte line (base/line_aligned.h): mid-line, the tiles' loads of
// its rows straddled two lines.
static float* widened_panel(size_t n) {
  thread_local LineAlignedVector<float> panel;
  if (panel.size() < n) panel = LineAlignedVector<float>(n);
  return panel.data();
}

int panel_rows(int K, int step) { return std::max(step, int(kPanelBytes / (size_t(K) * 4)) / step * step); }

// A few tokens (a batched decode step, one row per sequence): the weights stream from memory once
// for all of them (the ISA's stream tiles, no panels), and the threads meet at a barrier after every
// product of the step, so they share the rows with work stealing (work_shares.h) — on the Zen 5 VM
// one core streams slower than the other, and a static split left the faster one waiting:
// `orion bench generate --streams 8 --dtype f16`, 4 interleaved pairs: 497/563/579/654 →
// 577/600/611/649 tok/s. q8_0 tokens are quantised once, before the threads start: quantising them
// in every take made the step slower than the static split (752–807 → 677–751 tok/s).

FewTokenInput prepare_few_tokens(const float* x, int M, int K, DType wt) {
  FewTokenInput in{x, M, K, wt};
  if (wt == DType::Q8_0) {
    const Q8Activations a = quantize_activations(x, M, K);
    in.q8 = a.q, in.q8_scales = a.d;
  }
  return in;
}

int few_token_rows_unit() { return 8 * isa_kernels().gemm_rows_step; }  // 8 tiles' rows (whole q8_0 tiles too)

void few_token_rows(float* y, const FewTokenInput& in, const void* W, const float* bias, int N, int n0, int n1) {
  const IsaKernels& ker = isa_kernels();
  if (in.wt == DType::Q8_0) return ker.q8_gemm_quantized(y, {in.q8, in.q8_scales}, W, bias, in.M, in.K, N, n0, n1);
  // The ISA kernels stream f16/bf16 rows for a few tokens; a kernel that widened them instead (the
  // portable one does not) finds room for the range here.
  const bool narrow = in.wt == DType::F16 || in.wt == DType::BF16;
  ker.gemm_rows(y, in.x, W, in.wt, bias, in.M, in.K, N, n0, n1, widened_panel(narrow ? size_t(n1 - n0) * in.K : 0));
}

static void matmul_few_tokens(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N) {
  constexpr int kStepUnits = 2;                              // units a thread takes from the front of its own run at a time
  const FewTokenInput in = prepare_few_tokens(x, M, K, wt);  // (q8_0: this thread's scratch, read by all)
  WorkShares rows;
  rows.reset(N, few_token_rows_unit(), num_threads());
#pragma omp parallel
  {
    int n0, n1;
    while (rows.next(kStepUnits, &n0, &n1)) few_token_rows(y, in, W, bias, N, n0, n1);
  }
}

void matmul_prefill(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N) {
  const IsaKernels& ker = isa_kernels();
  // q8_0: one call per thread over its whole range — the q8_0 tile keeps a few weight rows in L1
  // while all tokens pass, so panels gain nothing there, and every call quantises all of x again.
  const int step = ker.gemm_rows_step, tiles = (N + step - 1) / step;
  const int panel = wt == DType::Q8_0 ? std::max(N, 1) : panel_rows(K, step);
  const bool big = double(M) * K * N >= 1e6;  // smaller: not worth waking threads
  if (big && M <= kFewTokens) return matmul_few_tokens(y, x, W, wt, bias, M, K, N);
#pragma omp parallel if (big)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int n0 = std::min(N, tiles * t / nt * step), n1 = std::min(N, tiles * (t + 1) / nt * step);
    float* scratch = widened_panel(wt == DType::F32 || wt == DType::Q8_0 ? 0 : size_t(panel) * K);
    for (int p = n0; p < n1; p += panel) ker.gemm_rows(y, x, W, wt, bias, M, K, N, p, std::min(n1, p + panel), scratch);
  }
}

}  // namespace orion::cpu
