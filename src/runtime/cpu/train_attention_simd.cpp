// Causal attention of one (sequence, head) in a training step, with AVX-512: the forward and the
// backward written as the small matrix products they are, each run by one register-tile kernel.
//
// One head, one sequence; Q, dO [T, HS] (rows q_stride apart), K, V [T, HS] (kv_stride apart),
// P [T, T] the probabilities (row t: P[t, s], 0 for s > t):
//   forward:   S = Q·Kᵀ·scale (s ≤ t),  P = softmax of each row,  O = P·V
//   backward:  dP = dO·Vᵀ,  dS = P ⊙ (dP − rowsum(P ⊙ dP))·scale,
//              dQ += dS·K,  dK += dSᵀ·Q,  dV += Pᵀ·dO
// Causality makes every product a triangle: a tile of query rows t ∈ [t0, t0 + R) needs keys s < t0 + R
// only, and a tile of key rows s ∈ [s0, s0 + R) queries t ≥ s0 only; terms past the diagonal inside
// a tile are products with P = 0 or dS = 0 (set explicitly), so they add nothing.
//
// The register tile (as llm.c's matmul, but with AVX-512 vectors): R ≤ 6 rows × J ≤ 4 vectors of
// 16 columns of C in registers; per term k it loads J vectors of B's row k and broadcasts one A
// value per row. The products run over rows of B that are contiguous: Kᵀ and Vᵀ are transposed
// once per head so that S and dP read them row by row too.
//
// Sums run in an order fixed by T and HS (one thread per head; the callers split heads over
// threads), so the results do not depend on the number of threads. Against the portable loops in
// train/cpu/layers.cpp: the same products summed in another order, and e^x from libmvec.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_kernels.h"
#include "runtime/cpu/vector_math.h"

#define ORION_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593 in the AVX-512 headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace orion::cpu {
namespace {

constexpr int kRows = 6, kVecs = 4, kCols = 16 * kVecs;  // a tile: 6 rows × 64 columns, 24 zmm

// Lanes [0, n) of a 16-float vector (none for n ≤ 0).
ORION_AVX512 inline __mmask16 first(int n) { return n >= 16 ? __mmask16(0xffff) : n > 0 ? __mmask16((1u << n) - 1) : 0; }

// C[r, 0..n) = (accumulate ? C[r, ·] : 0) + Σ_{k<K} A(r, k)·B[k·ldb + 0..n)   for r < R, n ≤ 16·J
// where A(r, k) = A[r·ars + k·aks]: A is read one value at a time (broadcast), so it may be walked
// along its rows or down its columns; B row by row. C[r, c] = Σ_k in order k = 0, 1, …
template <int R, int J>
ORION_AVX512 void tile(float* C, size_t ldc, const float* A, size_t ars, size_t aks, const float* B, size_t ldb, int K,
                       int n, bool accumulate) {
  __mmask16 m[J];
#pragma GCC unroll 4
  for (int j = 0; j < J; j++) m[j] = first(n - 16 * j);
  __m512 acc[R][J];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int j = 0; j < J; j++)
      acc[r][j] = accumulate ? _mm512_maskz_loadu_ps(m[j], C + r * ldc + 16 * j) : _mm512_setzero_ps();
  for (int k = 0; k < K; k++) {
    __m512 b[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; j++) b[j] = _mm512_maskz_loadu_ps(m[j], B + size_t(k) * ldb + 16 * j);
    const float* a = A + size_t(k) * aks;
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      const __m512 av = _mm512_set1_ps(a[r * ars]);
#pragma GCC unroll 4
      for (int j = 0; j < J; j++) acc[r][j] = _mm512_fmadd_ps(av, b[j], acc[r][j]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int j = 0; j < J; j++) _mm512_mask_storeu_ps(C + r * ldc + 16 * j, m[j], acc[r][j]);
}

// tile<R, J> for every R ≤ 6, J ≤ 4, indexed [R − 1][J − 1].
using TileFn = void (*)(float*, size_t, const float*, size_t, size_t, const float*, size_t, int, int, bool);
template <int R, int... J>
constexpr std::array<TileFn, kVecs> tiles_of_rows(std::integer_sequence<int, J...>) {
  return {tile<R, J + 1>...};
}
template <int... R>
constexpr std::array<std::array<TileFn, kVecs>, kRows> tile_table(std::integer_sequence<int, R...>) {
  return {tiles_of_rows<R + 1>(std::make_integer_sequence<int, kVecs>())...};
}
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kRows>());

// Rows [0, R) × columns [0, N) of C (+)= A·B with K terms, in column blocks of 64.
void rows_times(float* C, size_t ldc, const float* A, size_t ars, size_t aks, const float* B, size_t ldb, int R, int K,
                int N, bool accumulate) {
  for (int c = 0; c < N; c += kCols) {
    const int n = std::min(kCols, N - c);
    kTiles[size_t(R - 1)][size_t((n + 15) / 16 - 1)](C + c, ldc, A, ars, aks, B + c, ldb, K, n, accumulate);
  }
}

// xt[i·T + s] = x[s·stride + i]: a head's T rows of HS transposed (i < HS, s < T).
void transpose_head(float* xt, const float* x, size_t stride, int T, int HS) {
  constexpr int kB = 16;  // 16 × 16 blocks: both sides stay within a few cache lines
  for (int s0 = 0; s0 < T; s0 += kB)
    for (int i0 = 0; i0 < HS; i0 += kB)
      for (int s = s0; s < std::min(T, s0 + kB); s++)
        for (int i = i0; i < std::min(HS, i0 + kB); i++) xt[size_t(i) * T + s] = x[size_t(s) * stride + i];
}

float* scratch(int i, size_t n) {
  thread_local std::vector<float> buf[2];
  if (buf[i].size() < n) buf[i].resize(n);
  return buf[i].data();
}

// Row t of P from the scores in p[0 .. t] (already S = q·k, unscaled): p[s] = e^(S·scale − max) / Σ
// over the keys s0 ≤ s ≤ t the query sees; 0 elsewhere in p[0 .. T).
ORION_AVX512 void softmax_row(float* p, int s0, int t, int T, float scale) {
  const __m512 sc = _mm512_set1_ps(scale);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int s = s0; s <= t; s += 16) {
    const __mmask16 m = first(t + 1 - s);
    mx = _mm512_mask_max_ps(mx, m, mx, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + s), sc));
  }
  const __m512 mxv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int s = s0; s <= t; s += 16) {
    const __mmask16 m = first(t + 1 - s);
    const __m512 e = _mm512_maskz_mov_ps(m, vecmath::exp16(_mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + s), sc), mxv)));
    sum = _mm512_add_ps(sum, e);
    _mm512_mask_storeu_ps(p + s, m, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int s = s0; s <= t; s += 16) {
    const __mmask16 m = first(t + 1 - s);
    _mm512_mask_storeu_ps(p + s, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + s), inv));
  }
  std::fill(p, p + s0, 0.0f);
  std::fill(p + t + 1, p + T, 0.0f);
}

// Row t of dS from row t of dP in ds[0 .. t]: ds[s] = p[s]·(dP[s] − Σ_u p[u]·dP[u])·scale for s ≤ t,
// and 0 for t < s < end (the rest of the tile's columns, which the products below read).
ORION_AVX512 void softmax_backward_row(float* ds, const float* p, int t, int end, float scale) {
  __m512 pdp = _mm512_setzero_ps();
  for (int s = 0; s <= t; s += 16) {
    const __mmask16 m = first(t + 1 - s);
    pdp = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p + s), _mm512_maskz_loadu_ps(m, ds + s), pdp);
  }
  const __m512 sum = _mm512_set1_ps(_mm512_reduce_add_ps(pdp)), sc = _mm512_set1_ps(scale);
  for (int s = 0; s <= t; s += 16) {
    const __mmask16 m = first(t + 1 - s);
    const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, ds + s), sum);
    _mm512_mask_storeu_ps(ds + s, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + s), d), sc));
  }
  std::fill(ds + t + 1, ds + std::max(end, t + 1), 0.0f);
}

}  // namespace

// AVX-512 only: with AVX2 attention takes the portable loops (train/cpu/layers.cpp).
bool attention_simd_available(int HS) { return active_isa() == Isa::Avx512 && HS > 0; }

void attention_head_forward_simd(float* out, float* att, const float* q, const float* k, const float* v, size_t q_stride,
                                 size_t kv_stride, int T, int HS, float scale, int window) {
  float* kt = scratch(0, size_t(HS) * T);  // Kᵀ [HS, T]
  transpose_head(kt, k, kv_stride, T, HS);
  for (int t0 = 0; t0 < T; t0 += kRows) {
    const int R = std::min(kRows, T - t0), keys = t0 + R;  // rows t0 .. t0+R−1 see keys < t0 + R
    // S[t, s] = Σ_i Q[t, i]·Kᵀ[i, s]   (into the rows of P)
    rows_times(att + size_t(t0) * T, size_t(T), q + size_t(t0) * q_stride, q_stride, 1, kt, size_t(T), R, HS, keys, false);
    for (int t = t0; t < t0 + R; t++) softmax_row(att + size_t(t) * T, attention_start(t, window), t, T, scale);
    // O[t, c] = Σ_s P[t, s]·V[s, c]
    rows_times(out + size_t(t0) * q_stride, q_stride, att + size_t(t0) * T, size_t(T), 1, v, kv_stride, R, keys, HS, false);
  }
}

void attention_head_backward_simd(float* dq, float* dk, float* dv, const float* dout, const float* att, const float* q,
                                  const float* k, const float* v, size_t q_stride, size_t kv_stride, int T, int HS,
                                  float scale) {
  float* vt = scratch(0, size_t(HS) * T);  // Vᵀ [HS, T]
  float* ds = scratch(1, size_t(T) * T);   // dP, then dS [T, T]
  transpose_head(vt, v, kv_stride, T, HS);
  for (int t0 = 0; t0 < T; t0 += kRows) {
    const int R = std::min(kRows, T - t0), keys = t0 + R;
    // dP[t, s] = Σ_i dO[t, i]·Vᵀ[i, s], then dS row by row
    rows_times(ds + size_t(t0) * T, size_t(T), dout + size_t(t0) * q_stride, q_stride, 1, vt, size_t(T), R, HS, keys, false);
    for (int t = t0; t < t0 + R; t++) softmax_backward_row(ds + size_t(t) * T, att + size_t(t) * T, t, keys, scale);
    // dQ[t, c] += Σ_s dS[t, s]·K[s, c]
    rows_times(dq + size_t(t0) * q_stride, q_stride, ds + size_t(t0) * T, size_t(T), 1, k, kv_stride, R, keys, HS, true);
  }
  for (int s0 = 0; s0 < T; s0 += kRows) {
    const int R = std::min(kRows, T - s0), queries = T - s0;  // key rows s0 .. s0+R−1 are seen by t ≥ s0
    const size_t at = size_t(s0) * T + size_t(s0);              // [t = s0, s = s0]
    // dK[s, c] += Σ_t dS[t, s]·Q[t, c]    dV[s, c] += Σ_t P[t, s]·dO[t, c]
    rows_times(dk + size_t(s0) * kv_stride, kv_stride, ds + at, 1, size_t(T), q + size_t(s0) * q_stride, q_stride, R, queries,
               HS, true);
    rows_times(dv + size_t(s0) * kv_stride, kv_stride, att + at, 1, size_t(T), dout + size_t(s0) * q_stride, q_stride, R,
               queries, HS, true);
  }
}

}  // namespace orion::cpu
