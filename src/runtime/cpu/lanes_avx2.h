// The lanes of an 8-float AVX2 vector, for the AVX2 kernel files (*_avx2.cpp, compiled with -mavx2;
// include it from nowhere else). AVX2 has no mask registers: a whole vector loads and stores plainly
// (All), the partial last vector of a row through vmaskmovps with a lane mask (Some: lane j is on
// when the sign bit of its int is set), which reads and writes nothing past the lanes that are on.
// Internal linkage (an unnamed namespace), so no other file's flags ever compile these.
#pragma once
#include <immintrin.h>

#include <cstddef>

namespace orion::cpu::lanes_avx2 {
namespace {

struct All {};         // a whole vector: no mask
using Some = __m256i;  // the partial last vector's lanes

// Lanes [0, n) on (none for n ≤ 0, all for n ≥ 8).
inline Some first(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }

inline __m256 load(const float* p, All) { return _mm256_loadu_ps(p); }
inline __m256 load(const float* p, Some k) { return _mm256_maskload_ps(p, k); }
// Lanes off read `fill` (a whole vector has none).
inline __m256 load(const float* p, All, float) { return _mm256_loadu_ps(p); }
inline __m256 load(const float* p, Some k, float fill) {
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, k), _mm256_castsi256_ps(k));
}
inline void store(float* p, All, __m256 x) { _mm256_storeu_ps(p, x); }
inline void store(float* p, Some k, __m256 x) { _mm256_maskstore_ps(p, k, x); }

// The 8 lanes summed (or maxed) in a fixed order: the two halves, then pairs, then the last two.
inline float sum_of(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float max_of(__m256 x) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}


// y[i·ldy + j] = sum_of(acc[i][j]) (+ bias[j]): a tile's sums, as matvec_block ends a row.
template <int MT, int NT>
inline void store_tile(float* y, int ldy, const __m256 (&acc)[MT][NT], const float* bias) {
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) {
      const float s = sum_of(acc[i][j]);
      y[size_t(i) * ldy + j] = bias ? s + bias[j] : s;
    }
}

}  // namespace
}  // namespace orion::cpu::lanes_avx2
