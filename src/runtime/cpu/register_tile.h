// The accumulator tile of the training products (train_gemm.cpp: fp32 FMAs, train_gemm_lowp.cpp:
// vdpbf16ps): R rows × 64 columns of C in R × 4 zmm registers, columns from n on masked off.
// Only for files compiled for AVX-512 (or functions with that target).
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace orion::cpu::tile64 {

#define ORION_TILE64 __attribute__((target("avx512f"), always_inline))

// Lanes of the 4 vectors that hold columns < n.
ORION_TILE64 inline void column_masks(int n, __mmask16 (&mask)[4]) {
  for (int j = 0; j < 4; j++) {
    const int left = n - 16 * j;
    mask[j] = left >= 16 ? __mmask16(0xffff) : left > 0 ? __mmask16((1u << left) - 1) : __mmask16(0);
  }
}

// The tile's starting values: C's (kLoadC: the product adds to C); else the bias row (bias[j] down
// column j) or 0 — the product overwrites C, and its sums start where adding to a C filled with the
// bias (or zeroed) would, bit for bit.
template <int R, bool kLoadC>
ORION_TILE64 inline void load(__m512 (&acc)[R][4], const float* C, size_t ldc, const __mmask16 (&mask)[4],
                              const float* bias) {
#pragma GCC unroll 8
  for (int i = 0; i < R; i++)
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
      acc[i][j] = kLoadC ? _mm512_maskz_loadu_ps(mask[j], C + i * ldc + 16 * j)
                  : bias ? _mm512_maskz_loadu_ps(mask[j], bias + 16 * j)
                         : _mm512_setzero_ps();
}

// C = the tile. stream: whole aligned lines go out with non-temporal stores — for the last write
// of C in a product, where a plain store would first read each line from memory.
template <int R>
ORION_TILE64 inline void store(float* C, size_t ldc, const __m512 (&acc)[R][4], const __mmask16 (&mask)[4], int n,
                               bool stream) {
  if (stream && n == 64 && (reinterpret_cast<uintptr_t>(C) | ldc * sizeof(float)) % 64 == 0) {
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
      for (int j = 0; j < 4; j++) _mm512_stream_ps(C + i * ldc + 16 * j, acc[i][j]);
    return;
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; i++)
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) _mm512_mask_storeu_ps(C + i * ldc + 16 * j, mask[j], acc[i][j]);
}

#undef ORION_TILE64

}  // namespace orion::cpu::tile64
