// AVX2 + FMA + F16C kernels (8 fp32 lanes). Compiled with -mavx2 -mfma -mf16c (src/CMakeLists.txt)
// and only called when the CPU has them (dispatch.cpp); -mavxvnni too, which only the q8_0 kernels
// (kernels_q8_avx2.cpp) use, and only when the CPU has AVX-VNNI. Same structure as
// kernels_avx512.cpp; AVX2 has no masked 16-bit loads, so tails are copied into a zero-padded block
// of 8 first.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "runtime/cpu/kernels_q8.h"
#include "runtime/cpu/lanes_avx2.h"
#include "runtime/cpu/vector_math.h"

namespace orion::cpu {
namespace {

using lanes_avx2::store_tile;
using lanes_avx2::sum_of;

// How every fp32/f16/bf16 kernel below sums a row (decode, prefill and few-token tiles alike, so
// they agree bit for bit): the row's k in groups of 8, group g = k / 8 (the last one zero-padded)
// added into accumulator g mod 2 — a0 lane j sums k ≡ j, a1 lane j sums k ≡ j + 8 (mod 16) — and
// the row's sum is sum_of(a0 + a1). Two accumulators make two independent FMA chains per row: with
// one, a row read on its own (the decode's order on AMD) was a single chain of K/8 dependent FMAs.
// `ORION_ISA=avx2` on the Zen 5 VM (bench/RESULTS.md): Stories110M f16 decode 63–68% → 79–81% of
// the bandwidth bound; prefill −5–18% (its tile sums the even groups, then the odd ones); batches
// of 2 level, of 8 −9–10% (2 × 3 tiles). To be weighed again on an AVX2-only machine.
constexpr int ROWS = 4;  // weight rows per step: 2·ROWS independent FMA chains, x loaded once for all
// Rows are prefetched PREFETCH_L1_BYTES / PREFETCH_L2_BYTES ahead (kernels_impl.h).

// 8 weights at p (element type of D) as fp32.
template <DType D>
inline __m256 load8(const void* p) {
  if constexpr (D == DType::F32) {
    return _mm256_loadu_ps(static_cast<const float*>(p));
  } else {
    const __m128i h = _mm_loadu_si128(static_cast<const __m128i*>(p));
    if constexpr (D == DType::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));  // bf16 = top half of f32
  }
}

// group(k, a) for every whole group of 8 of a row in address order, group g into accumulator
// a = g mod 2, then tail(k, a) for the last K − k < 8 elements, if any (group k / 8). (Decode rows
// and few-token tiles; the prefill tiles go by parity.)
template <typename Group, typename Tail>
__attribute__((always_inline)) inline void for_each_group_in_row_order(int K, Group&& group, Tail&& tail) {
  int k = 0;
  for (; k + 16 <= K; k += 16) group(k, 0), group(k + 8, 1);
  if (k + 8 <= K) group(k, 0), k += 8;
  if (k < K) tail(k, (k / 8) % 2);
}

// Rows n .. n+R−1: acc[r][0] and acc[r][1] sum row n+r's groups as the order above says, the same
// for any R. With PF each row is prefetched ahead of its loads (MatvecOrder::RowBlocks).
template <DType D, int R, bool PF>
inline void matvec_block(float* y, const float* x, const void* W, const float* bias, int K, int n) {
  const size_t es = dtype_size(D), row_bytes = size_t(K) * es;
  const uint8_t* w0 = static_cast<const uint8_t*>(W) + size_t(n) * row_bytes;
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  // Group k .. k+7 of every row into accumulator a.
  auto group = [&](int k, int a) __attribute__((always_inline)) {
    if (PF && k * es % 64 == 0)  // once per 64-byte cache line of each row
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        const char* line = reinterpret_cast<const char*>(w0 + r * row_bytes + k * es);
        _mm_prefetch(line + PREFETCH_L1_BYTES, _MM_HINT_T0);
        _mm_prefetch(line + PREFETCH_L2_BYTES, _MM_HINT_T1);
      }
    const __m256 xv = _mm256_loadu_ps(x + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[r][a] = _mm256_fmadd_ps(load8<D>(w0 + r * row_bytes + k * es), xv, acc[r][a]);
  };
  // The tail of K % 8 elements, copied into zero-padded blocks.
  for_each_group_in_row_order(K, group, [&](int k, int a) {
    const int t = K - k;
    alignas(32) float xt[8] = {};
    std::memcpy(xt, x + k, t * 4);
    const __m256 xv = _mm256_load_ps(xt);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      alignas(32) uint8_t wt[32] = {};
      std::memcpy(wt, w0 + r * row_bytes + k * es, t * es);
      acc[r][a] = _mm256_fmadd_ps(load8<D>(wt), xv, acc[r][a]);
    }
  });
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    const float s = sum_of(_mm256_add_ps(acc[r][0], acc[r][1]));
    y[n + r] = bias ? s + bias[n + r] : s;
  }
}

// Rows n0 .. n1−1 in the order matvec_order() names (kernels.h), as in kernels_avx512.cpp.
template <DType D>
void matvec_rows_t(float* y, const float* x, const void* W, const float* bias, int K, int n0, int n1) {
  int n = n0;
  if (matvec_order() == MatvecOrder::RowByRow) {
    for (; n < n1; n++) matvec_block<D, 1, false>(y, x, W, bias, K, n);
    return;
  }
  for (; n + ROWS <= n1; n += ROWS) matvec_block<D, ROWS, true>(y, x, W, bias, K, n);
  for (; n < n1; n++) matvec_block<D, 1, true>(y, x, W, bias, K, n);
}

void matvec_rows(float* y, const float* x, const void* W, DType wt, const float* bias, int K, int n0, int n1) {
  switch (wt) {
    case DType::F32: return matvec_rows_t<DType::F32>(y, x, W, bias, K, n0, n1);
    case DType::F16: return matvec_rows_t<DType::F16>(y, x, W, bias, K, n0, n1);
    case DType::BF16: return matvec_rows_t<DType::BF16>(y, x, W, bias, K, n0, n1);
    case DType::Q8_0: return q8_matvec_avx2(y, x, W, bias, K, n0, n1);
  }
}

// dst[i] = fp32(src[i]), 8 at a time, the tail through the scalar conversions of base/dtype.h
// (exact either way: every f16 and bf16 value is an fp32 value).
void to_f32(float* dst, const void* src, DType dt, size_t n) {
  if (dt == DType::F32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  if (dt == DType::Q8_0) return dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n);
  const uint16_t* s = static_cast<const uint16_t*>(src);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, dt == DType::F16 ? load8<DType::F16>(s + i) : load8<DType::BF16>(s + i));
  for (; i < n; i++) dst[i] = dt == DType::F16 ? f16_to_f32(s[i]) : bf16_to_f32(s[i]);
}

// --- prefill: register-tiled y = x·Wᵀ --------------------------------------------------------------
//
// A tile of TM tokens × TN weight rows keeps TM·TN accumulators in registers (3·4 = 12 of the 16
// ymm registers; 3 more hold x, 1 the weights): 12 FMAs per 7 loads. Each (token, row) sums as
// matvec_block sums a row (the even groups, then the odd ones; see gemm_tile), so prefill and
// decode give the same y bit for bit.
constexpr int TM = 3, TN = 4;

// y[i, j] = Σ_k x[i, k]·w[j, k] (+ bias[j]) for i < MT, j < NT.
//   x: MT rows, stride K;  w: NT fp32 rows, stride K;  y: row stride ldy.
template <int MT, int NT>
inline void gemm_tile(float* y, int ldy, const float* x, const float* w, const float* bias, int K) {
  __m256 acc[MT][NT];
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) acc[i][j] = _mm256_setzero_ps();
  // One step: 8 k of every x and w row, read from xs / ws (row strides sx / sw).
  auto step = [&](const float* xs, size_t sx, const float* ws, size_t sw) __attribute__((always_inline)) {
    __m256 xv[MT];
#pragma GCC unroll 8
    for (int i = 0; i < MT; i++) xv[i] = _mm256_loadu_ps(xs + i * sx);
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) {
      const __m256 wv = _mm256_loadu_ps(ws + j * sw);
#pragma GCC unroll 8
      for (int i = 0; i < MT; i++) acc[i][j] = _mm256_fmadd_ps(wv, xv[i], acc[i][j]);
    }
  };
  const int whole = K / 8 * 8;  // where the zero-padded last group starts, if K % 8
  // Both sets would need 24 registers: one set in registers, the other waiting in memory. Taking
  // all even groups and then all odd ones would read each 64-byte line of the rows twice from L2
  // (a line holds one even and one odd group of 8); instead each chunk of kChunk k runs its even
  // groups, then its odd ones, so the second pass finds the chunk's lines in L1.
  constexpr int kChunk = 256;  // k: 1 KB of each row, 7 KB for a 3 × 4 tile
  __m256 sums[2][MT][NT];      // the even and the odd groups' sums
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) sums[0][i][j] = sums[1][i][j] = _mm256_setzero_ps();
  // body() with sums[a] as the accumulators in registers.
  auto into = [&](int a, auto&& body) __attribute__((always_inline)) {
#pragma GCC unroll 8
    for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
      for (int j = 0; j < NT; j++) acc[i][j] = sums[a][i][j];
    body();
#pragma GCC unroll 8
    for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
      for (int j = 0; j < NT; j++) sums[a][i][j] = acc[i][j];
  };
  // The groups of parity a in [k0, k1) (k0 a multiple of 16) added into sums[a].
  auto pass = [&](int a, int k0, int k1) __attribute__((always_inline)) {
    into(a, [&] {
      for (int k = k0 + 8 * a; k < k1; k += 16) step(x + k, size_t(K), w + k, size_t(K));
    });
  };
  for (int k0 = 0; k0 < whole; k0 += kChunk) {
    const int k1 = std::min(whole, k0 + kChunk);
    pass(0, k0, k1);
    pass(1, k0, k1);
  }
  if (whole < K) {  // tail of K % 8 (group whole / 8), copied into zero-padded blocks of 8
    alignas(32) float xt[MT][8] = {}, wt[NT][8] = {};
#pragma GCC unroll 8
    for (int i = 0; i < MT; i++) std::memcpy(xt[i], x + size_t(i) * K + whole, (K - whole) * 4);
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) std::memcpy(wt[j], w + size_t(j) * K + whole, (K - whole) * 4);
    into((whole / 8) % 2, [&] { step(xt[0], 8, wt[0], 8); });
  }
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) acc[i][j] = _mm256_add_ps(sums[0][i][j], sums[1][i][j]);
  store_tile<MT, NT>(y, ldy, acc, bias);
}

// --- batched decode: a few tokens against weights streamed from memory ----------------------------
//
// As in kernels_avx512.cpp: a decode step of a few sequences (M ≤ STREAM_TOKENS_MAX) loads each
// weight once from memory (matvec's prefetching), widens it in a register and uses it for every
// token of a tile. Each (token, row) keeps both accumulators of the order above in registers and
// sums like matvec_block, so every row equals its single-sequence decode bit for bit: 2 tokens ×
// 3 rows = 12 accumulators, 2 x registers, 1 weight.
constexpr int STREAM_TOKENS_MAX = 16, STREAM_TM = 2, STREAM_R = 3, STREAM_R_FEW = 3;

// y[i, n + r] = Σ_k x[i, k]·W[n + r, k] (+ bias) for i < MT, r < R.   x: MT rows, stride K; y: stride ldy
template <DType D, int MT, int R>
inline void stream_tile(float* y, int ldy, const float* x, const void* W, const float* bias, int K, int n) {
  static_assert(2 * MT * R + MT + 1 <= 16, "both accumulator sets, x and a weight vector fit the ymm registers");
  const size_t es = dtype_size(D), row_bytes = size_t(K) * es;
  const uint8_t* w0 = static_cast<const uint8_t*>(W) + size_t(n) * row_bytes;
  __m256 acc[MT][R][2];
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[i][r][0] = acc[i][r][1] = _mm256_setzero_ps();
  // One group into accumulator a: 8 k of every x row (xs, stride sx) and weight row (ws(r)).
  auto step = [&](const float* xs, size_t sx, auto&& ws, int a) __attribute__((always_inline)) {
    __m256 xv[MT];
#pragma GCC unroll 8
    for (int i = 0; i < MT; i++) xv[i] = _mm256_loadu_ps(xs + i * sx);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const __m256 wv = load8<D>(ws(r));
#pragma GCC unroll 8
      for (int i = 0; i < MT; i++) acc[i][r][a] = _mm256_fmadd_ps(wv, xv[i], acc[i][r][a]);
    }
  };
  auto group = [&](int k, int a) __attribute__((always_inline)) {
    if (k * es % 64 == 0)  // once per 64-byte cache line of each row, as in matvec_block
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        const char* line = reinterpret_cast<const char*>(w0 + r * row_bytes + k * es);
        _mm_prefetch(line + PREFETCH_L1_BYTES, _MM_HINT_T0);
        _mm_prefetch(line + PREFETCH_L2_BYTES, _MM_HINT_T1);
      }
    step(x + k, size_t(K), [&](int r) { return w0 + r * row_bytes + k * es; }, a);
  };
  // The tail of K % 8, copied into zero-padded blocks of 8 (as matvec_block does).
  for_each_group_in_row_order(K, group, [&](int k, int a) {
    const int t = K - k;
    alignas(32) float xt[MT][8] = {};
    alignas(32) uint8_t wt[R][32] = {};
#pragma GCC unroll 8
    for (int i = 0; i < MT; i++) std::memcpy(xt[i], x + size_t(i) * K + k, t * 4);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) std::memcpy(wt[r], w0 + r * row_bytes + k * es, t * es);
    step(xt[0], 8, [&](int r) { return static_cast<const void*>(wt[r]); }, a);
  });
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const float sum = sum_of(_mm256_add_ps(acc[i][r][0], acc[i][r][1]));
      y[size_t(i) * ldy + n + r] = bias ? sum + bias[n + r] : sum;
    }
}

// The prefill and batched-decode loops over the tiles above (shared with the other ISA file).
constexpr auto q8_gemm_isa = q8_gemm_avx2;
#include "runtime/cpu/kernels_gemm_loops.inc"

float dot(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = sum_of(acc);
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

void axpy(float* y, float s, const float* x, int n) {
  const __m256 sv = _mm256_set1_ps(s);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; i++) y[i] += s * x[i];
}

// Attention over cached positions (IsaKernels::scores, weighted_sum and their f16 forms): the sums
// of dot and axpy.

// 8 cache elements as fp32: f32 as they are, f16 widened (vcvtph2ps, exact); one element likewise.
inline __m256 load_kv(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load_kv(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline float widen(float x) { return x; }
inline float widen(uint16_t h) { return _cvtsh_ss(h); }

// att[j] = dot(q, k_j)·scale for P positions j (rows kv_stride apart), each summed as dot() does.
template <int P, typename T>
inline void scores_block(float* att, const float* q, const T* k, int n, int kv_stride, float scale) {
  __m256 acc[P];
#pragma GCC unroll 8
  for (int j = 0; j < P; j++) acc[j] = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
#pragma GCC unroll 8
    for (int j = 0; j < P; j++) acc[j] = _mm256_fmadd_ps(qv, load_kv(k + size_t(j) * kv_stride + i), acc[j]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < P; j++) {
    const T* kj = k + size_t(j) * kv_stride;
    float s = sum_of(acc[j]);
    for (int t = i; t < n; t++) s += q[t] * widen(kj[t]);
    att[j] = s * scale;
  }
}

// scores for a head size HS known at compile time (a multiple of 8): one position at a time, its
// row's loads in address order — one sequential stream for the prefetchers, as in
// kernels_avx512.cpp's scores_hs. Each sum as scores_block's (no tail).
template <int HS, typename T>
void scores_hs(float* att, const float* q, const T* k, int len, int kv_stride, float scale) {
  for (int p = 0; p < len; p++) {
    const T* kp = k + size_t(p) * kv_stride;
    __m256 acc = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < HS; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_kv(kp + i), acc);
    att[p] = sum_of(acc) * scale;
  }
}

template <typename T>
void scores(float* att, const float* q, const T* k, int len, int head_dim, int kv_stride, float scale) {
  if (head_dim == 64) return scores_hs<64>(att, q, k, len, kv_stride, scale);
  if (head_dim == 128) return scores_hs<128>(att, q, k, len, kv_stride, scale);
  constexpr int P = 4;  // positions per pass: P independent FMA chains
  int p = 0;
  for (; p + P <= len; p += P) scores_block<P>(att + p, q, k + size_t(p) * kv_stride, head_dim, kv_stride, scale);
  for (; p < len; p++) scores_block<1>(att + p, q, k + size_t(p) * kv_stride, head_dim, kv_stride, scale);
}

// Channels i0 .. i0 + 8·G − 1 of out = Σ_p att[p]·v_p, in G registers over all positions: per
// channel the same FMAs in the same order as axpy from out = 0.
template <int G, typename T>
inline void weighted_sum_slice(float* out, const float* att, const T* v, int len, int kv_stride, int i0) {
  __m256 o[G];
#pragma GCC unroll 8
  for (int g = 0; g < G; g++) o[g] = _mm256_setzero_ps();
  for (int p = 0; p < len; p++) {
    const __m256 sv = _mm256_set1_ps(att[p]);
    const T* vp = v + size_t(p) * kv_stride + i0;
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) o[g] = _mm256_fmadd_ps(sv, load_kv(vp + 8 * g), o[g]);
  }
#pragma GCC unroll 8
  for (int g = 0; g < G; g++) _mm256_storeu_ps(out + i0 + 8 * g, o[g]);
}

template <typename T>
void weighted_sum(float* out, const float* att, const T* v, int len, int head_dim, int kv_stride) {
  constexpr int G = 8;  // registers of out per pass (64 channels)
  int i = 0;
  for (; i + 8 * G <= head_dim; i += 8 * G) weighted_sum_slice<G>(out, att, v, len, kv_stride, i);
  for (; i + 8 <= head_dim; i += 8) weighted_sum_slice<1>(out, att, v, len, kv_stride, i);
  for (; i < head_dim; i++) {  // the channels past the last 8, as axpy's scalar tail sums them
    float o = 0;
    for (int p = 0; p < len; p++) o += att[p] * widen(v[size_t(p) * kv_stride + i]);
    out[i] = o;
  }
}

// IsaKernels::softmax: the max and the sum over 8 lanes (reduced in a fixed order), e^x from libmvec.
void softmax(float* x, int n) {
  using namespace lanes_avx2;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  __m256 mx = _mm256_set1_ps(neg_inf);
  int i = 0;
  for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, load(x + i, All{}));
  if (i < n) mx = _mm256_max_ps(mx, load(x + i, first(n - i), neg_inf));
  const __m256 m = _mm256_set1_ps(max_of(mx));
  __m256 s = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = vecmath::exp8(_mm256_sub_ps(load(x + i, All{}), m));
    store(x + i, All{}, e);
    s = _mm256_add_ps(s, e);
  }
  if (i < n) {  // the lanes off hold e^(−∞) = 0
    const __m256 e = vecmath::exp8(_mm256_sub_ps(load(x + i, first(n - i), neg_inf), m));
    store(x + i, first(n - i), e);
    s = _mm256_add_ps(s, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / sum_of(s));
  for (i = 0; i + 8 <= n; i += 8) store(x + i, All{}, _mm256_mul_ps(load(x + i, All{}), inv));
  if (i < n) store(x + i, first(n - i), _mm256_mul_ps(load(x + i, first(n - i)), inv));
}

// IsaKernels::read_fold: 128 bytes per step, four 32-byte loads XORed into four registers.
uint64_t read_fold(const void* p, size_t words) {
  const char* b = static_cast<const char*>(p);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 16 <= words; i += 16) {
    const __m256i* s = reinterpret_cast<const __m256i*>(b + 8 * i);
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(s));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(s + 1));
    a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(s + 2));
    a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(s + 3));
  }
  uint64_t lanes[4], f = 0;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)));
  for (uint64_t w : lanes) f ^= w;
  return f ^ xor_words(b + 8 * i, words - i);  // the words past the last whole step
}

}  // namespace

const IsaKernels kAvx2Kernels = {Isa::Avx2,
                                 matvec_rows,
                                 q8_matvec_quantized_avx2,
                                 gemm_rows,
                                 TN,
                                 q8_gemm_avx2,
                                 to_f32,
                                 dot,
                                 axpy,
                                 scores<float>,
                                 weighted_sum<float>,
                                 scores<uint16_t>,
                                 weighted_sum<uint16_t>,
                                 q8_quantize_avx2,
                                 softmax,
                                 read_fold};

}  // namespace orion::cpu
