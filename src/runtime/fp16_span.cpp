// Buffer conversions to and from fp16 (see fp16_span.h for why they match the scalar
// functions bit for bit).
#include "runtime/fp16_span.h"

#include <immintrin.h>

#include <algorithm>

#include "base/dtype.h"
#include "runtime/cpu/kernels.h"

namespace orion::runtime {
namespace {

// The scalar definitions, for the portable path, the tails and the blocks holding a NaN.
void round_scalar(float* p, int64_t n) {
  for (int64_t i = 0; i < n; i++) p[i] = f16_to_f32(f32_to_f16(p[i]));
}
void widen_scalar(float* dst, const uint16_t* src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = f16_to_f32(src[i]);
}
void narrow_scalar(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = f32_to_f16(src[i]);
}

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT;  // the conversions' rounding: nearest, ties to even

[[gnu::target("avx512f")]] void round_avx512(float* p, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(p + i);
    if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) round_scalar(p + i, 16);
    else _mm512_storeu_ps(p + i, _mm512_cvtph_ps(_mm512_cvtps_ph(x, kRound)));
  }
  round_scalar(p + i, n - i);
}
[[gnu::target("avx512f")]] void widen_avx512(float* dst, const uint16_t* src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) widen_scalar(dst + i, src + i, 16);
    else _mm512_storeu_ps(dst + i, x);
  }
  widen_scalar(dst + i, src + i, n - i);
}
[[gnu::target("avx512f")]] void narrow_avx512(uint16_t* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(src + i);
    if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) narrow_scalar(dst + i, src + i, 16);
    else _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtps_ph(x, kRound));
  }
  narrow_scalar(dst + i, src + i, n - i);
}

[[gnu::target("avx2,f16c")]] void round_avx2(float* p, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(p + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) round_scalar(p + i, 8);
    else _mm256_storeu_ps(p + i, _mm256_cvtph_ps(_mm256_cvtps_ph(x, kRound)));
  }
  round_scalar(p + i, n - i);
}
[[gnu::target("avx2,f16c")]] void widen_avx2(float* dst, const uint16_t* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) widen_scalar(dst + i, src + i, 8);
    else _mm256_storeu_ps(dst + i, x);
  }
  widen_scalar(dst + i, src + i, n - i);
}
[[gnu::target("avx2,f16c")]] void narrow_avx2(uint16_t* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) narrow_scalar(dst + i, src + i, 8);
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(x, kRound));
  }
  narrow_scalar(dst + i, src + i, n - i);
}

// Runs f(begin, count) over [0, n): in one call when n is small (no parallel region at all: the
// callers convert many short rows), else in chunks on all threads.
template <typename F>
void chunked(int64_t n, F f) {
  constexpr int64_t kChunk = 1 << 14;
  if (n <= (1 << 16)) return f(0, n);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; c++) f(c * kChunk, std::min(kChunk, n - c * kChunk));
}

}  // namespace

void round_fp16_span(float* p, int64_t n) {
  auto fn = round_scalar;
  if (cpu::active_isa() == cpu::Isa::Avx512) fn = round_avx512;
  if (cpu::active_isa() == cpu::Isa::Avx2) fn = round_avx2;  // the AVX2 path requires F16C
  chunked(n, [&](int64_t i, int64_t m) { fn(p + i, m); });
}

void f16_to_f32_span(float* dst, const uint16_t* src, int64_t n) {
  auto fn = widen_scalar;
  if (cpu::active_isa() == cpu::Isa::Avx512) fn = widen_avx512;
  if (cpu::active_isa() == cpu::Isa::Avx2) fn = widen_avx2;
  chunked(n, [&](int64_t i, int64_t m) { fn(dst + i, src + i, m); });
}

void f32_to_f16_span(uint16_t* dst, const float* src, int64_t n) {
  auto fn = narrow_scalar;
  if (cpu::active_isa() == cpu::Isa::Avx512) fn = narrow_avx512;
  if (cpu::active_isa() == cpu::Isa::Avx2) fn = narrow_avx2;
  chunked(n, [&](int64_t i, int64_t m) { fn(dst + i, src + i, m); });
}

}  // namespace orion::runtime
