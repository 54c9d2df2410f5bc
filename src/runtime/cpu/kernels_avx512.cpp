// AVX-512 kernels (16 fp32 lanes). Compiled with -mavx512f/bw/vl/dq -mfma -mf16c (src/CMakeLists.txt)
// and only called when the CPU has them (dispatch.cpp).
//
// Decode matvec: y = x·Wᵀ reads every weight once and does 2 flops per weight, so it runs at the
// speed memory delivers W. The loop below loads 16 weights of ROWS rows per step, widens them to
// fp32 (f16: vcvtph2ps; bf16: shift the 16 bits into the top half of an fp32) and FMAs them with the
// same 16 values of x, which stay in a register for all ROWS rows.
#include <immintrin.h>

// GCC 12's AVX-512 headers self-initialise a dummy operand (`__m256d __Y = __Y;`), which -Wall
// reports at every use (GCC bug 105593); the warning says nothing about this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstring>
#include <limits>

#include "runtime/cpu/kernels_q8.h"
#include "runtime/cpu/lanes_avx512.h"
#include "runtime/cpu/vector_math.h"

namespace orion::cpu {
namespace {

using lanes_avx512::hsum;
using lanes_avx512::lanes_from;
using lanes_avx512::store_tile;

constexpr int ROWS = 8;  // weight rows per step: ROWS independent FMA chains, x loaded once for all
// Rows are prefetched PREFETCH_L1_BYTES / PREFETCH_L2_BYTES ahead (kernels_impl.h). The decode matvec's near distance, and its prefetches stop at the end of the caller's rows: a
// decode step runs ~85 short ranges per token, and 128 KB fetched past the end of each (another
// thread's rows or an unrelated buffer) is bandwidth taken from the rows in use; the decode step
// fetches the start of its next range itself (prefetch_rows). Stories110M f16 decode, one thread,
// 7 interleaved rounds on a loaded machine (bench/RESULTS.md): min ms/token 0.89–1.05× the
// unclamped 8 KB form, median 0.95×.
constexpr int MATVEC_L1_BYTES = 16 << 10;

// 16 weights starting at element k of a row, as fp32. `mask` selects the valid lanes of a tail;
// masked-off lanes read nothing and are zero.
template <DType D>
inline __m512 load16(const void* row, int k, __mmask16 mask) {
  if constexpr (D == DType::F32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(row) + k);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(row) + k);
    if constexpr (D == DType::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // bf16 = top half of f32
  }
}

// How every fp32/f16/bf16 kernel below sums a row (decode, prefill and few-token tiles alike, so
// they agree bit for bit): the row's k in groups of 16, group g = k / 16 (the last one masked, its
// missing lanes zero) added into accumulator g mod 2 — a0 lane j sums k ≡ j, a1 lane j sums
// k ≡ j + 16 (mod 32) — and the row's sum is hsum(a0 + a1). Two accumulators make two independent
// FMA chains per row. With one, a row read on its own (the decode's order on AMD, MatvecOrder::
// RowByRow) was a single chain of K/16 dependent FMAs, which computed only 43–51 GB/s of f16
// weights on one Zen 5 core (bench_kernels BM_DecodeArithmetic), barely above the core's share of
// memory bandwidth; two chains compute 54–63 GB/s and lifted Stories110M f16 decode from 71–78%
// to 76–82% of the bandwidth bound (bench/RESULTS.md).

// The mask of group k's lanes that lie inside K.
inline __mmask16 group_mask(int k, int K) { return lanes_from(k, K); }

// step(k, mask) for every group of parity a in order (a = 0: k = 0, 32, …; a = 1: k = 16, 48, …).
// The prefill tiles run all even groups, then all odd ones, with one accumulator set in registers:
// the even sums wait in memory meanwhile. Each pass touches its own 64-byte lines of fp32 rows, so
// the two passes read no more than one. Prefill took 4–9% longer than with one accumulator; a
// tile holding both sets (3 × 4) and passes in chunks of 512 or 1024 k were slower still.
template <typename Step>
inline void for_each_group_of_parity(int K, int a, Step&& step) {
  for (int k = 16 * a; k < K; k += 32) step(k, group_mask(k, K));
}

// group(k, a, mask) for every group of a row in address order, group g into accumulator a = g mod 2:
// the whole pairs, then the last one or two groups, masked. (Decode rows and few-token tiles; the
// prefill tiles go by parity, for_each_group_of_parity.)
template <typename Group>
__attribute__((always_inline)) inline void for_each_group_in_row_order(int K, Group&& group) {
  int k = 0;
  for (; k + 32 <= K; k += 32) group(k, 0, 0xffff), group(k + 16, 1, 0xffff);
  if (k < K) group(k, 0, group_mask(k, K));
  if (k + 16 < K) group(k + 16, 1, group_mask(k + 16, K));
}

// Rows n .. n+R−1 (R ≤ ROWS): acc[r][0] and acc[r][1] sum row n+r's groups as the order above
// says, the same for any R. With PF each row is prefetched ahead of its loads, stopping at `end`
// (MatvecOrder::RowBlocks).
template <DType D, int R, bool PF>
inline void matvec_block(float* y, const float* x, const void* W, const float* bias, int K, int n, const char* end) {
  const size_t row_bytes = size_t(K) * dtype_size(D);
  const uint8_t* w0 = static_cast<const uint8_t*>(W) + size_t(n) * row_bytes;
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  // Group k of every row into accumulator a.
  auto group = [&](int k, int a, __mmask16 m) __attribute__((always_inline)) {
    if (PF && k * dtype_size(D) % 64 == 0)  // once per 64-byte cache line of each row
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        const char* line = reinterpret_cast<const char*>(w0 + r * row_bytes + k * dtype_size(D));
        if (line + MATVEC_L1_BYTES < end) _mm_prefetch(line + MATVEC_L1_BYTES, _MM_HINT_T0);
        if (line + PREFETCH_L2_BYTES < end) _mm_prefetch(line + PREFETCH_L2_BYTES, _MM_HINT_T1);
      }
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[r][a] = _mm512_fmadd_ps(load16<D>(w0 + r * row_bytes, k, m), xv, acc[r][a]);
  };
  for_each_group_in_row_order(K, group);
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    const float s = hsum(_mm512_add_ps(acc[r][0], acc[r][1]));
    y[n + r] = bias ? s + bias[n + r] : s;
  }
}

// Rows n0 .. n1−1 in the order matvec_order() names (kernels.h): row after row with no prefetch
// instructions (one stream for the hardware prefetcher), or ROWS rows side by side, prefetched.
template <DType D>
void matvec_rows_t(float* y, const float* x, const void* W, const float* bias, int K, int n0, int n1) {
  const char* end = static_cast<const char*>(W) + size_t(n1) * K * dtype_size(D);
  int n = n0;
  if (matvec_order() == MatvecOrder::RowByRow) {
    for (; n < n1; n++) matvec_block<D, 1, false>(y, x, W, bias, K, n, end);
    return;
  }
  for (; n + ROWS <= n1; n += ROWS) matvec_block<D, ROWS, true>(y, x, W, bias, K, n, end);
  for (; n < n1; n++) matvec_block<D, 1, true>(y, x, W, bias, K, n, end);
}

void matvec_rows(float* y, const float* x, const void* W, DType wt, const float* bias, int K, int n0, int n1) {
  switch (wt) {
    case DType::F32: return matvec_rows_t<DType::F32>(y, x, W, bias, K, n0, n1);
    case DType::F16: return matvec_rows_t<DType::F16>(y, x, W, bias, K, n0, n1);
    case DType::BF16: return matvec_rows_t<DType::BF16>(y, x, W, bias, K, n0, n1);
    case DType::Q8_0: return q8_matvec_avx512(y, x, W, bias, K, n0, n1);
  }
}

// dst[i] = fp32(src[i]), 16 at a time (a masked step for the tail).
void to_f32(float* dst, const void* src, DType dt, size_t n) {
  if (dt == DType::F32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  if (dt == DType::Q8_0) return dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n);
  const uint16_t* s = static_cast<const uint16_t*>(src);
  size_t i = 0;
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = dt == DType::F16 ? load16<DType::F16>(s + i, 0, m) : load16<DType::BF16>(s + i, 0, m);
    _mm512_mask_storeu_ps(dst + i, m, v);
  }
}

// --- prefill: register-tiled y = x·Wᵀ --------------------------------------------------------------
//
// A tile of TM tokens × TN weight rows keeps TM·TN accumulators in registers (4·6 = 24 of the 32
// zmm registers; 4 more hold x). Each step loads 16 k of TM x rows and TN weight rows and does
// TM·TN FMAs: 24 FMAs per 10 loads, where matvec does 4 per 5. Each (token, row) sums as
// matvec_block sums a row (the even groups, then the odd ones, then hsum of the two), so y is the
// same bit for bit.
constexpr int TM = 4, TN = 6;

// acc[i][j] += even[i][j]: the odd groups' sums joined to the even groups' (a0 + a1 of the order).
template <int MT, int NT>
inline void join_parities(__m512 (&acc)[MT][NT], const __m512 (&even)[MT][NT]) {
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) acc[i][j] = _mm512_add_ps(even[i][j], acc[i][j]);
}

// Sets the even groups' sums aside and starts the odd groups' from zero.
template <int MT, int NT>
inline void park_even(__m512 (&acc)[MT][NT], __m512 (&even)[MT][NT]) {
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) even[i][j] = acc[i][j], acc[i][j] = _mm512_setzero_ps();
}

// y[i, j] = Σ_k x[i, k]·w[j, k] (+ bias[j]) for i < MT, j < NT.
//   x: MT rows, stride K;  w: NT fp32 rows, stride K;  y: row stride ldy.
template <int MT, int NT>
inline void gemm_tile(float* y, int ldy, const float* x, const float* w, const float* bias, int K) {
  __m512 acc[MT][NT];
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) acc[i][j] = _mm512_setzero_ps();
  auto step = [&](int k, __mmask16 m) __attribute__((always_inline)) {
    __m512 xv[MT];
#pragma GCC unroll 8
    for (int i = 0; i < MT; i++) xv[i] = _mm512_maskz_loadu_ps(m, x + size_t(i) * K + k);
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) {
      const __m512 wv = _mm512_maskz_loadu_ps(m, w + size_t(j) * K + k);
#pragma GCC unroll 8
      for (int i = 0; i < MT; i++) acc[i][j] = _mm512_fmadd_ps(wv, xv[i], acc[i][j]);
    }
  };
  __m512 even[MT][NT];
  for_each_group_of_parity(K, 0, step);
  park_even(acc, even);
  for_each_group_of_parity(K, 1, step);
  join_parities(acc, even);
  store_tile<MT, NT>(y, ldy, acc, bias);
}

// --- batched decode: a few tokens against weights streamed from memory ----------------------------
//
// A decode step of a few sequences (M ≤ STREAM_TOKENS_MAX, e.g. orion serve's batch) is still
// memory-bound: each weight is loaded once (with matvec's prefetching), widened in a register and
// used by every token of a tile, instead of being widened into a scratch panel first. Each
// (token, row) keeps both accumulators of the order above in registers and sums like
// matvec_block, so every row equals its single-sequence decode bit for bit. Both sets need
// 2·MT·R registers: tiles of 3 tokens take 4 rows at a time (24 + 3 x + 1 w), one or two tokens 6
// rows (24 + 2 + 1). Measured on Stories110M f16, batches of 2–16 (bench/RESULTS.md): summing the
// even groups first and the odd ones after, as gemm_tile does, with 4 × 6 tiles took 10–25% off 2
// and 8 streams (the second pass reads from cache while memory idles); 4 tokens × 3 rows took
// 16–19% off 8 streams; 3 × 4 is level with the one-accumulator 4 × 6 tiles before.
constexpr int STREAM_TOKENS_MAX = 16, STREAM_TM = 3, STREAM_R = 4, STREAM_R_FEW = 6;

// y[i, n + r] = Σ_k x[i, k]·W[n + r, k] (+ bias) for i < MT, r < R.   x: MT rows, stride K; y: stride ldy
template <DType D, int MT, int R>
inline void stream_tile(float* y, int ldy, const float* x, const void* W, const float* bias, int K, int n) {
  static_assert(2 * MT * R + MT + 1 <= 32, "both accumulator sets, x and a weight vector fit the zmm registers");
  const size_t row_bytes = size_t(K) * dtype_size(D);
  const uint8_t* w0 = static_cast<const uint8_t*>(W) + size_t(n) * row_bytes;
  __m512 acc[MT][R][2];
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[i][r][0] = acc[i][r][1] = _mm512_setzero_ps();
  // Group k of every (token, row) into accumulator a.
  auto group = [&](int k, int a, __mmask16 m) __attribute__((always_inline)) {
    if (k * dtype_size(D) % 64 == 0)  // once per 64-byte cache line of each row, as in matvec_block
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        const char* line = reinterpret_cast<const char*>(w0 + r * row_bytes + k * dtype_size(D));
        _mm_prefetch(line + PREFETCH_L1_BYTES, _MM_HINT_T0);
        _mm_prefetch(line + PREFETCH_L2_BYTES, _MM_HINT_T1);
      }
    __m512 xv[MT];
#pragma GCC unroll 8
    for (int i = 0; i < MT; i++) xv[i] = _mm512_maskz_loadu_ps(m, x + size_t(i) * K + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const __m512 wv = load16<D>(w0 + r * row_bytes, k, m);
#pragma GCC unroll 8
      for (int i = 0; i < MT; i++) acc[i][r][a] = _mm512_fmadd_ps(wv, xv[i], acc[i][r][a]);
    }
  };
  for_each_group_in_row_order(K, group);
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++)
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const float sum = hsum(_mm512_add_ps(acc[i][r][0], acc[i][r][1]));
      y[size_t(i) * ldy + n + r] = bias ? sum + bias[n + r] : sum;
    }
}

// The prefill and batched-decode loops over the tiles above (shared with the other ISA file).
constexpr auto q8_gemm_isa = q8_gemm_avx512;
#include "runtime/cpu/kernels_gemm_loops.inc"

float dot(const float* a, const float* b, int n) {
  __m512 acc = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  }
  return hsum(acc);
}

void axpy(float* y, float s, const float* x, int n) {
  const __m512 sv = _mm512_set1_ps(s);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(sv, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// Attention over cached positions (IsaKernels::scores, weighted_sum and their f16 forms): the sums
// of dot and axpy.

// Lanes m of 16 cache elements as fp32: f32 as they are, f16 widened (vcvtph2ps, exact).
inline __m512 load_kv(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load_kv(__mmask16 m, const uint16_t* p) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

// att[j] = dot(q, k_j)·scale for P positions j (rows kv_stride apart), each summed as dot() does.
template <int P, typename T>
inline void scores_block(float* att, const float* q, const T* k, int n, int kv_stride, float scale) {
  __m512 acc[P];
#pragma GCC unroll 8
  for (int j = 0; j < P; j++) acc[j] = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = lanes_from(i, n);
    const __m512 qv = _mm512_maskz_loadu_ps(m, q + i);
#pragma GCC unroll 8
    for (int j = 0; j < P; j++) acc[j] = _mm512_fmadd_ps(qv, load_kv(m, k + size_t(j) * kv_stride + i), acc[j]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < P; j++) att[j] = hsum(acc[j]) * scale;
}

// scores for a head size HS known at compile time (a multiple of 16): q held in registers, one
// position at a time, its row's loads in address order — one sequential stream, which the
// prefetchers follow (blocks of P positions, each load step touching P rows, read a decode's
// cache ~35% slower from memory on the Zen 5 VM; bench/RESULTS.md). The out-of-order core
// overlaps the positions' independent FMA chains. Each sum as scores_block's (all lanes valid).
template <int HS, typename T>
void scores_hs(float* att, const float* q, const T* k, int len, int kv_stride, float scale) {
  constexpr int S = HS / 16;
  __m512 qv[S];
#pragma GCC unroll 8
  for (int s = 0; s < S; s++) qv[s] = _mm512_loadu_ps(q + 16 * s);
  for (int p = 0; p < len; p++) {
    const T* kp = k + size_t(p) * kv_stride;
    __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int s = 0; s < S; s++) acc = _mm512_fmadd_ps(qv[s], load_kv(__mmask16(0xffff), kp + 16 * s), acc);
    att[p] = hsum(acc) * scale;
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

// out = Σ_p att[p]·v_p, 64 channels at a time held in 4 registers over all positions: per channel the
// same FMAs in the same order as axpy from out = 0.
// G registers of out per pass: 8 (128 channels, all of a 128-wide head in one pass over its
// rows, every line of them in order) when the head is wider than 64, else 4.
template <int G, typename T>
void weighted_sum_g(float* out, const float* att, const T* v, int len, int head_dim, int kv_stride) {
  for (int i0 = 0; i0 < head_dim; i0 += 16 * G) {
    __mmask16 m[G];
    __m512 o[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
      const int i = i0 + 16 * g;
      m[g] = i < head_dim ? lanes_from(i, head_dim) : __mmask16(0);
      o[g] = _mm512_setzero_ps();
    }
    for (int p = 0; p < len; p++) {
      const __m512 sv = _mm512_set1_ps(att[p]);
      const T* vp = v + size_t(p) * kv_stride + i0;
#pragma GCC unroll 8
      for (int g = 0; g < G; g++) o[g] = _mm512_fmadd_ps(sv, load_kv(m[g], vp + 16 * g), o[g]);
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) _mm512_mask_storeu_ps(out + i0 + 16 * g, m[g], o[g]);
  }
}

template <typename T>
void weighted_sum(float* out, const float* att, const T* v, int len, int head_dim, int kv_stride) {
  if (head_dim > 64) return weighted_sum_g<8>(out, att, v, len, head_dim, kv_stride);
  weighted_sum_g<4>(out, att, v, len, head_dim, kv_stride);
}

// IsaKernels::softmax: the max and the sum over 16 lanes (reduced in a fixed order), e^x from libmvec.
void softmax(float* x, int n) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 mx = neg_inf;
  for (int i = 0; i < n; i += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(neg_inf, lanes_from(i, n), x + i));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 s = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) {  // the lanes off hold e^(−∞) = 0
    const __mmask16 k = lanes_from(i, n);
    const __m512 e = vecmath::exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(neg_inf, k, x + i), m));
    _mm512_mask_storeu_ps(x + i, k, e);
    s = _mm512_add_ps(s, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(s));
  for (int i = 0; i < n; i += 16) {
    const __mmask16 k = lanes_from(i, n);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
  }
}

// IsaKernels::read_fold: 256 bytes per step, four 64-byte loads XORed into four registers.
uint64_t read_fold(const void* p, size_t words) {
  const char* b = static_cast<const char*>(p);
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= words; i += 32) {
    const char* s = b + 8 * i;
    a0 = _mm512_xor_si512(a0, _mm512_loadu_si512(s));
    a1 = _mm512_xor_si512(a1, _mm512_loadu_si512(s + 64));
    a2 = _mm512_xor_si512(a2, _mm512_loadu_si512(s + 128));
    a3 = _mm512_xor_si512(a3, _mm512_loadu_si512(s + 192));
  }
  uint64_t lanes[8], f = 0;
  _mm512_storeu_si512(lanes, _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3)));
  for (uint64_t w : lanes) f ^= w;
  return f ^ xor_words(b + 8 * i, words - i);  // the words past the last whole step
}

}  // namespace

const IsaKernels kAvx512Kernels = {Isa::Avx512,
                                   matvec_rows,
                                   q8_matvec_quantized_avx512,
                                   gemm_rows,
                                   TN,
                                   q8_gemm_avx512,
                                   to_f32,
                                   dot,
                                   axpy,
                                   scores<float>,
                                   weighted_sum<float>,
                                   scores<uint16_t>,
                                   weighted_sum<uint16_t>,
                                   q8_quantize_avx512,
                                   softmax,
                                   read_fold};

}  // namespace orion::cpu
