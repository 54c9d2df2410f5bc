// The lanes of a 16-float AVX-512 vector, for the AVX-512 kernel files (*_avx512.cpp, compiled with
// -mavx512f and friends; include it from nowhere else). Internal linkage (an unnamed namespace), so no
// other file's flags ever compile these.
#pragma once
#include <immintrin.h>

#include <cstddef>

namespace orion::cpu::lanes_avx512 {
namespace {

// Sum of the 16 lanes in a fixed order: halves, quarters, pairs, then the last two.
inline float hsum(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The lanes of a vector starting at element i that lie below n (all 16 when n − i ≥ 16).
inline __mmask16 lanes_from(int i, int n) { return n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1); }

// y[i, j] = hsum(acc[i][j]) (+ bias[j]): a tile's sums stored (row stride ldy).
template <int MT, int NT>
inline void store_tile(float* y, int ldy, const __m512 (&acc)[MT][NT], const float* bias) {
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) {
      const float s = hsum(acc[i][j]);
      y[size_t(i) * ldy + j] = bias ? s + bias[j] : s;
    }
}

}  // namespace
}  // namespace orion::cpu::lanes_avx512
