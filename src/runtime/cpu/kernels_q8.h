// Internal to runtime/cpu: q8_0 weights (base/dtype.h), the part every instruction set shares.
//
// y = x·Wᵀ with W in q8_0 blocks runs on integers, as llama.cpp's "q8_0 × q8_0" dot does: each row
// of x is first quantised to the same kind of blocks (an fp32 scale d_x and 32 int8 per block,
// q = round(x / d_x), d_x = max|x| / 127), then for every block the 32 products q_w·q_x are summed
// exactly in int32 and scaled by d_w·d_x:
//   y[n] = Σ_blocks b  (Σ_{i<32} q_w[n, b, i]·q_x[b, i]) · d_w[n, b] · d_x[b]
// The ISA files (kernels_q8_generic.cpp, kernels_q8_avx2.cpp, kernels_q8_avx512.cpp) differ only in
// how they compute one block's int32 dot for a few rows at once (the `Ker::block` of the drivers
// below); the activations are quantised by one portable function, so they are the same int8 on
// every ISA.
#pragma once
#include <algorithm>
#include <cstdint>

#include "runtime/cpu/kernels_impl.h"

namespace orion::cpu {

// M rows of K activations quantised: q [M, K] int8, d [M, K/32] fp32 scales.
struct Q8Activations {
  const int8_t* q;
  const float* d;
};
// Quantises x [M, K] (K a multiple of 32) into the calling thread's scratch, valid until the
// thread's next call, with the active ISA's q8_quantize_*.
Q8Activations quantize_activations(const float* x, int M, int K);
// `blocks` blocks of 32 values x: d[b] = max|x| / 127 (fp32), q = nearbyint(x · (1/d[b])) (0 when
// d = 0). The SIMD versions give the portable one's bits for finite x: max|x| is exact in any order,
// the products are the same fp32 operations, and vcvtps2dq rounds to nearest even as nearbyint
// does in the default rounding mode. A decode step quantises every matrix's input once per thread.
void q8_quantize_generic(const float* x, int8_t* q, float* d, size_t blocks);
void q8_quantize_avx2(const float* x, int8_t* q, float* d, size_t blocks);
void q8_quantize_avx512(const float* x, int8_t* q, float* d, size_t blocks);

// Rows n0 .. n1−1 of y = x·Wᵀ (+ bias) from quantised activations (one row of K). Ker::block<R, PF>
// computes R consecutive rows (R = Ker::kRows, or 1 for the leftovers); PF says whether it
// prefetches the rows ahead of the loads (decode streams W from memory; prefill reuses a few rows
// from cache). A row's sum never depends on R, so any split of the rows gives the same bits.
// Decode (STREAM) walks the rows in the order matvec_order() names (kernels.h): with RowByRow one
// row after the next and no prefetch instructions.
//   Ker::block<R, PF>(y, xq, xd, w, row_bytes, blocks, bias): y[r] for rows w + r·row_bytes.
template <class Ker, bool STREAM>
void q8_rows(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K, int n0, int n1) {
  const size_t row_bytes = dtype_bytes(DType::Q8_0, size_t(K));
  const uint8_t* w = static_cast<const uint8_t*>(W);
  const int blocks = K / kQ8Block;
  auto b = [&](int n) { return bias ? bias + n : nullptr; };
  int n = n0;
  if (STREAM && matvec_order() == MatvecOrder::RowByRow) {
    for (; n < n1; n++) Ker::template block<1, false>(y + n, xq, xd, w + size_t(n) * row_bytes, row_bytes, blocks, b(n));
    return;
  }
  constexpr bool PF = STREAM;
  for (; n + Ker::kRows <= n1; n += Ker::kRows)
    Ker::template block<Ker::kRows, PF>(y + n, xq, xd, w + size_t(n) * row_bytes, row_bytes, blocks, b(n));
  for (; n < n1; n++) Ker::template block<1, PF>(y + n, xq, xd, w + size_t(n) * row_bytes, row_bytes, blocks, b(n));
}

// Decode: rows n0 .. n1−1 of y = x·Wᵀ (+ bias) for one token, from x quantised by the caller
// (Ker's rows, streamed).
template <class Ker>
void q8_matvec_quantized(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K, int n0,
                         int n1) {
  q8_rows<Ker, true>(y, xq, xd, W, bias, K, n0, n1);
}
// The same from fp32 x: x quantised, then `quantized` (an ISA's q8_matvec_quantized_*, below).
using Q8MatvecQuantized = void (*)(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K,
                                   int n0, int n1);
inline void q8_matvec_from_f32(Q8MatvecQuantized quantized, float* y, const float* x, const void* W, const float* bias,
                               int K, int n0, int n1) {
  const Q8Activations a = quantize_activations(x, 1, K);
  quantized(y, a.q, a.d, W, bias, K, n0, n1);
}

// Prefill: columns n0 .. n1−1 of y[M, N] from the M tokens quantised (a). A tile of Ker::kRows
// weight rows (a few KB) stays in the L1 cache while every token passes over it; each element is
// summed exactly as in decode.
template <class Ker>
void q8_gemm_rows(float* y, const Q8Activations& a, const void* W, const float* bias, int M, int K, int N, int n0, int n1) {
  const int blocks = K / kQ8Block;
  for (int n = n0; n < n1; n += Ker::kRows) {
    const int n_end = std::min(n1, n + Ker::kRows);
    for (int m = 0; m < M; m++)
      q8_rows<Ker, false>(y + size_t(m) * N, a.q + size_t(m) * K, a.d + size_t(m) * blocks, W, bias, K, n, n_end);
  }
}

// The q8_0 entry points of each instruction set (kernels_*.cpp call them for DType::Q8_0).
void q8_matvec_generic(float* y, const float* x, const void* W, const float* bias, int K, int n0, int n1);
// The prefill columns n0 .. n1−1 from the tokens already quantised (quantize_activations(x, M, K)):
// IsaKernels::q8_gemm_quantized, and gemm_rows for Q8_0 after quantising x.
void q8_gemm_generic(float* y, const Q8Activations& a, const void* W, const float* bias, int M, int K, int N, int n0,
                     int n1);
void q8_matvec_avx2(float* y, const float* x, const void* W, const float* bias, int K, int n0, int n1);
void q8_gemm_avx2(float* y, const Q8Activations& a, const void* W, const float* bias, int M, int K, int N, int n0, int n1);
void q8_matvec_avx512(float* y, const float* x, const void* W, const float* bias, int K, int n0, int n1);
// The decode rows from activations already quantised (IsaKernels::q8_matvec_quantized).
void q8_matvec_quantized_generic(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K,
                                 int n0, int n1);
void q8_matvec_quantized_avx2(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K,
                              int n0, int n1);
void q8_matvec_quantized_avx512(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K,
                                int n0, int n1);
void q8_gemm_avx512(float* y, const Q8Activations& a, const void* W, const float* bias, int M, int K, int N, int n0, int n1);

// Streaming R weight rows (row_bytes apart from w) from memory, as the decode kernels do: before a
// kernel's loads reach byte `upto` of its rows, each row's 64-byte lines from `next` on are
// prefetched `near` bytes ahead into L1 and `far` bytes ahead into L2 (one core's L1 fill buffers
// alone cannot keep enough lines in flight; kernels_impl.h). next: the first line not yet
// prefetched, advanced here.
template <int R>
inline void prefetch_rows_ahead(const uint8_t* w, size_t row_bytes, size_t& next, size_t upto, int near, int far) {
  for (; next < upto; next += 64)
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const uint8_t* line = w + r * row_bytes + next;
      __builtin_prefetch(line + near, 0, 3);  // _MM_HINT_T0
      __builtin_prefetch(line + far, 0, 2);   // _MM_HINT_T1
    }
}

// The AVX2 and AVX-512 kernels use vpdpbusd (AVX-VNNI, AVX512-VNNI) when the CPU has it, else
// vpmaddubsw + vpmaddwd (the same exact sums). Tests switch it off to check the other path; each
// returns whether it is on.
bool set_avx2_vnni(bool on);
bool set_avx512_vnni(bool on);
bool cpu_has_avx_vnni();     // CPUID leaf 7 subleaf 1, EAX bit 4 (dispatch.cpp)
bool cpu_has_avx512_vnni();  // CPUID leaf 7, ECX bit 11
// False when the environment says ORION_VNNI=off: the kernels then take their vpmaddubsw path even
// where the CPU has VNNI — to measure, on a newer core, a machine without it (an AVX2-only EPYC:
// ORION_ISA=avx2 ORION_VNNI=off). Any other value is ignored (VNNI never changes a result).
bool vnni_allowed();
bool avx2_vnni_on();         // the current setting of each (on by default when the CPU has it)
bool avx512_vnni_on();

}  // namespace orion::cpu
