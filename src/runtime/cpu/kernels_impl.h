// Internal to runtime/cpu: the kernels that exist once per instruction set, and the table that
// dispatch.cpp fills with one of them at start-up.
//
// Every function here is single-threaded; the OpenMP loops that split the work live in
// dispatch.cpp and gemm.cpp, so the three versions differ only in how they vectorise.
//
// Determinism rule: for a given ISA, the order in which each output element is summed depends only
// on the sizes (K, n), never on which rows a call is given. That is what makes a matmul split over
// 1 or 2 threads give bit-identical results.
#pragma once
#include <cstddef>

#include "base/dtype.h"
#include "runtime/cpu/kernels.h"

namespace orion::cpu {

struct IsaKernels {
  Isa isa;
  // Decode rows n0 .. n1−1 of y = x·Wᵀ (+ bias):  y[n] = Σ_k x[k]·W[n, k]
  //   x: [K] fp32;  W: [N, K] in dtype wt;  y: [N];  bias: [N] or nullptr.
  void (*matvec_rows)(float* y, const float* x, const void* W, DType wt, const float* bias, int K, int n0, int n1);
  // Prefill columns n0 .. n1−1 of y[M, N] = x[M, K]·W[N, K]ᵀ (+ bias), every element summed in
  // the same order as matvec_rows (so prefill and decode agree bit for bit). `scratch` holds
  // (n1 − n0) × K floats (f16/bf16 weight rows widened to fp32 once, reused by all M rows; q8_0
  // weights stay int8 and need none).
  void (*gemm_rows)(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N, int n0,
                    int n1, float* scratch);
  int gemm_rows_step;  // weight rows per tile of gemm_rows; threads split N in multiples of it
  // dst[i] = fp32(src[i]) for i < n (f32, f16, bf16 or q8_0 source; n a multiple of 32 for q8_0).
  void (*to_f32)(float* dst, const void* src, DType dt, size_t n);
  // Σ_i a[i]·b[i], and y[i] += s·x[i]: the two loops of attention over head_dim.
  float (*dot)(const float* a, const float* b, int n);
  void (*axpy)(float* y, float s, const float* x, int n);
  // One query head against `len` cached positions p, rows k_p = k + p·kv_stride (v_p likewise):
  //   scores:       att[p] = dot(q, k_p, head_dim)·scale
  //   weighted_sum: out = Σ_p att[p]·v_p, i.e. out = 0, then axpy(out, att[p], v_p) for p = 0, 1, …
  // equal to those loops bit for bit, but with several positions (scores) or a slice of out kept in
  // registers over all positions (weighted_sum) per pass: the loops' per-position call, horizontal
  // sum and load/store of out were most of a decode's attention time.
  void (*scores)(float* att, const float* q, const float* k, int len, int head_dim, int kv_stride, float scale);
  void (*weighted_sum)(float* out, const float* att, const float* v, int len, int head_dim, int kv_stride);
};

// Decode prefetching. A decode kernel steps over W a few rows at a time (R rows, 16 to 64 bytes of
// each per step), so its loads form R interleaved streams, one per row. At every 64-byte line of its
// rows a step prefetches the same line of rows further on: whole steps ahead, at least
// kPrefetchAheadBytes (rows are contiguous: 8 f16 rows of K = 768 are one 12 KB step), so the step
// that reaches them finds them in cache — in L1 when that is at most kPrefetchL1Bytes ahead, else in
// L2 (long rows would leave the 48 KB L1 before use). Measured on AMD Zen 5 (bench/RESULTS.md):
// 8 KB ahead is as good as 4–32 KB, and beats both no prefetch and the fixed distances tuned earlier
// on an Intel Xeon (8 KB into L1 + 128 KB into L2 for every line); L1 beat L2 on short row ranges.
constexpr size_t kPrefetchAheadBytes = 8 << 10, kPrefetchL1Bytes = 32 << 10;
struct PrefetchAhead {
  const char* at;  // the rows a step over `rows` prefetches from
  bool into_l1;
};
inline PrefetchAhead prefetch_ahead(const void* rows, size_t row_bytes, int R) {
  const size_t step = size_t(R) * row_bytes, ahead = (kPrefetchAheadBytes + step - 1) / step * step;
  return {static_cast<const char*>(rows) + ahead, ahead <= kPrefetchL1Bytes};
}
// Prefetches line `offset` of the R rows at `ahead` (each row_bytes long). Past the end of W is
// harmless: a prefetch never faults.
inline void prefetch_rows(const PrefetchAhead& ahead, size_t row_bytes, int R, size_t offset) {
  const char* p = ahead.at + offset;
  if (ahead.into_l1) {
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) __builtin_prefetch(p + r * row_bytes, 0, 3);
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) __builtin_prefetch(p + r * row_bytes, 0, 2);
  }
}

// One table per instruction set; the AVX tables are only used when the CPU has the instructions.
extern const IsaKernels kGenericKernels;
extern const IsaKernels kAvx2Kernels;
extern const IsaKernels kAvx512Kernels;

// The table in use (set at start-up, or by set_isa).
const IsaKernels& isa_kernels();

// Prefill: y[M, N] = x[M, K]·W[N, K]ᵀ (+ bias) for M > 1, split over threads (gemm.cpp).
void matmul_prefill(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N);
// Weight rows per L2-sized panel of K fp32 columns, in multiples of `step` (gemm.cpp).
int panel_rows(int K, int step);
// The GEMM library's prompt path (gemm_library.cpp): whether matmul() hands this product to it, and
// the product itself (Orion's matmul_prefill when the build has no library).
bool use_library_gemm(DType wt, int M);
void matmul_library(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N);

}  // namespace orion::cpu
