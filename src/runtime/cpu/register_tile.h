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

// r[i][j] ↔ r[j][i] for a 16 × 16 block of 32-bit words (bf16 pairs, floats as bits): four rounds
// that swap the off-diagonal w × w blocks (w = 8, 4, 2, 1) of each 2w × 2w block, two two-source
// permutes per pair of rows.
struct TransposeLanes {
  alignas(64) int lo[4][16], hi[4][16];  // round k: w = 8 >> k
  constexpr TransposeLanes() : lo{}, hi{} {
    for (int k = 0; k < 4; k++)
      for (int l = 0, w = 8 >> k; l < 16; l++) {
        lo[k][l] = (l & w) == 0 ? l : 16 + l - w;  // a's own lane, or b's lane w to the left
        hi[k][l] = (l & w) == 0 ? l + w : 16 + l;  // a's lane w to the right, or b's own lane
      }
  }
};
inline constexpr TransposeLanes kTransposeLanes;

ORION_TILE64 inline void transpose16(__m512i r[16]) {
#pragma GCC unroll 4
  for (int k = 0, w = 8; k < 4; k++, w /= 2) {
    const __m512i il = _mm512_load_si512(kTransposeLanes.lo[k]), ih = _mm512_load_si512(kTransposeLanes.hi[k]);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
      if (i & w) continue;
      const __m512i a = r[i], b = r[i + w];
      r[i] = _mm512_permutex2var_epi32(a, il, b);
      r[i + w] = _mm512_permutex2var_epi32(a, ih, b);
    }
  }
}

#undef ORION_TILE64

}  // namespace orion::cpu::tile64
