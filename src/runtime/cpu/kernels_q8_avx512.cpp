// AVX-512 kernels for q8_0 weights (kernels_q8.h): decode rows and prefill tiles, with AVX512-VNNI
// where the CPU has it. Compiled with -mavx512f/bw/vl/dq/vnni -mfma -mf16c (src/CMakeLists.txt) and
// only called when the CPU has AVX-512 (dispatch.cpp); kernels_avx512.cpp's table points here.
#include <immintrin.h>

// GCC 12's AVX-512 headers self-initialise a dummy operand (GCC bug 105593); see kernels_avx512.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <vector>

#include "runtime/cpu/kernels_q8.h"
#include "runtime/cpu/lanes_avx512.h"

namespace orion::cpu {
namespace {

using lanes_avx512::hsum;
using lanes_avx512::store_tile;

// Two 32-byte blocks of a weight row per 64-byte step.
//
// The two blocks' quants (bytes 2..33 and 36..67 of the pair: each block starts with its fp16
// scale) are loaded into the halves of one zmm; lanes 0–7 of the 16 int32 sums below belong to the
// first block, lanes 8–15 to the second. The products are signed × signed bytes:
//  - AVX512-VNNI: vpdpbusd multiplies unsigned by signed bytes and adds groups of 4 into int32.
//    q_w ^ 0x80 is q_w + 128 as an unsigned byte, so Σ (q_w + 128)·q_x = Σ q_w·q_x + 128·Σ q_x;
//    starting the sum at −128·Σ q_x (one vpdpbusd per step, shared by all rows) leaves the exact
//    dot product, for one vpxord + one vpdpbusd per row.
//  - without VNNI (AVX512BW only): there is no vpsignb, so the weights' sign moves onto the
//    activations with a mask (negate q_x where q_w < 0), then |q_w|·(±q_x) through vpmaddubsw +
//    vpmaddwd (pair sums ≤ 2·127·127: no saturation). The same exact sums.
// The int32 sums become fp32 and are FMAed with d_w·d_x of their block: both fp16 scales of the
// row's pair widened at once (vcvtph2ps), times the activations' two scales.

bool g_vnni = cpu_has_avx512_vnni() && vnni_allowed();


// The activations' part of a step, the same for every row: the quants x, and −128·Σ x per group of
// 4 bytes (the start of the VNNI sums).
struct Q8Step {
  __m512i x, start;
};
template <bool VNNI>
inline Q8Step q8_step(__m512i x) {
  if constexpr (!VNNI) return {x, _mm512_setzero_si512()};
  const __m512i sum128 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(char(0x80)), x);
  return {x, _mm512_sub_epi32(_mm512_setzero_si512(), sum128)};
}

// 16 int32: lane j sums the products of bytes 4j .. 4j+3 of w and s.x (signed × signed, exact).
template <bool VNNI>
inline __m512i dot_bytes(__m512i w, const Q8Step& s) {
  if constexpr (VNNI) return _mm512_dpbusd_epi32(s.start, _mm512_xor_si512(w, _mm512_set1_epi8(char(0x80))), s.x);
  const __m512i aw = _mm512_abs_epi8(w);
  const __m512i sx = _mm512_mask_sub_epi8(s.x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), s.x);
  return _mm512_madd_epi16(_mm512_maddubs_epi16(aw, sx), _mm512_set1_epi16(1));
}

// The fp16 scales d0 (lanes 0–7) and d1 (lanes 8–15) of two blocks, as fp32.
inline __m512 scales(uint16_t d0, uint16_t d1) {
  const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(short(d0))), _mm_set1_epi16(short(d1)), 1);
  return _mm512_cvtph_ps(h);
}
inline uint16_t scale_bits(const uint8_t* block) {
  uint16_t d;
  __builtin_memcpy(&d, block, 2);
  return d;
}
// s0 in lanes 0–7, s1 in lanes 8–15.
inline __m512 halves(float s0, float s1) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(s0)), _mm256_set1_ps(s1), 1);
}

// One pair step of a row (its blocks' quants at pair + 2 and pair + 36, scales at pair and pair + 34):
// acc + (the two blocks' int32 dots, as fp32) · (their scales d_w · xs).
template <bool VNNI>
inline __m512 pair_step(__m512 acc, const uint8_t* pair, const Q8Step& s, __m512 xs) {
  const __m512i wv = _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 2))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + kQ8BlockBytes + 2)), 1);
  const __m512 dot = _mm512_cvtepi32_ps(dot_bytes<VNNI>(wv, s));
  const __m512 scale = _mm512_mul_ps(scales(scale_bits(pair), scale_bits(pair + kQ8BlockBytes)), xs);
  return _mm512_fmadd_ps(dot, scale, acc);
}

template <bool VNNI>
struct Avx512Q8 {
  static constexpr int kRows = 4;  // measured: 8 rows are slower (register pressure)
  template <int R, bool PF>
  static void block(float* y, const int8_t* xq, const float* xd, const uint8_t* w, size_t row_bytes, int blocks,
                    const float* bias) {
    __m512 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    size_t next_line = 0;  // the next 64-byte line (offset within a row) to prefetch
    int b = 0;
    for (; b + 2 <= blocks; b += 2) {
      const size_t at = size_t(b) * kQ8BlockBytes;
      if constexpr (PF)
        prefetch_rows_ahead<R>(w, row_bytes, next_line, at + 2 * kQ8BlockBytes, PREFETCH_L1_BYTES, PREFETCH_L2_BYTES);
      const Q8Step s = q8_step<VNNI>(_mm512_loadu_si512(xq + size_t(b) * kQ8Block));
      const __m512 xs = halves(xd[b], xd[b + 1]);
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) acc[r] = pair_step<VNNI>(acc[r], w + r * row_bytes + at, s, xs);
    }
    if (b < blocks) {  // an odd last block: the upper half stays zero (scale 0 there)
      const size_t at = size_t(b) * kQ8BlockBytes;
      const Q8Step s = q8_step<VNNI>(
          _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + size_t(b) * kQ8Block))));
      const __m512 xs = halves(xd[b], 0.0f);
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        const uint8_t* blk = w + r * row_bytes + at;
        const __m512i wv = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)));
        const __m512 dot = _mm512_cvtepi32_ps(dot_bytes<VNNI>(wv, s));
        acc[r] = _mm512_fmadd_ps(dot, _mm512_mul_ps(scales(scale_bits(blk), 0), xs), acc[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const float s = hsum(acc[r]);
      y[r] = bias ? s + bias[r] : s;
    }
  }
};

// Decode row by row (MatvecOrder::RowByRow): the activations' part of every pair step — the quants
// and their VNNI start (q8_step), and the two blocks' scales d_x side by side — is the same for every
// row, so it is computed once per call into the thread's scratch (192 bytes a pair: 6 KB for K 2048,
// in L1) and each row's step only loads it. The same operations on the same values as
// Avx512Q8::block<1, false>, so the same bits. On the Zen 5 VM (one thread, W in L2; bench_kernels
// BM_DecodeArithmetic, which runs at one of two rates there) 28–31 or 43–48 → 37–42 or 48–50 GB/s
// of weights; the decode itself was level within the VM's noise (bench/RESULTS.md).
struct alignas(64) PreparedPair {
  Q8Step s;
  __m512 xs;
};
template <bool VNNI>
void q8_rows_prepared(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K, int n0,
                      int n1) {
  const size_t row_bytes = dtype_bytes(DType::Q8_0, size_t(K));
  const int blocks = K / kQ8Block, pairs = blocks / 2;
  if (blocks % 2) return q8_matvec_quantized<Avx512Q8<VNNI>>(y, xq, xd, W, bias, K, n0, n1);  // (an odd last block)
  thread_local std::vector<PreparedPair> prepared;
  if (prepared.size() < size_t(pairs)) prepared.resize(size_t(pairs));
  for (int p = 0; p < pairs; p++)
    prepared[size_t(p)] = {q8_step<VNNI>(_mm512_loadu_si512(xq + size_t(2 * p) * kQ8Block)), halves(xd[2 * p], xd[2 * p + 1])};
  const PreparedPair* pp = prepared.data();
  for (int n = n0; n < n1; n++) {
    const uint8_t* w = static_cast<const uint8_t*>(W) + size_t(n) * row_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int p = 0; p < pairs; p++) acc = pair_step<VNNI>(acc, w + size_t(2 * p) * kQ8BlockBytes, pp[p].s, pp[p].xs);
    const float sum = hsum(acc);
    y[n] = bias ? sum + bias[n] : sum;
  }
}

// Prefill: a tile of TM tokens × 4 weight rows per step, so each weight pair (and its scales) is
// loaded once for TM tokens and each token's step once for 4 rows. Every (token, row) sum is the
// same sequence of operations as Avx512Q8::block's, so prefill and decode agree bit for bit.
constexpr int Q8_TM = 4, Q8_TN = 4;  // (q8_gemm's leftover tiles assume Q8_TM ≤ 4)
static_assert(Q8_TM <= 4);

template <bool VNNI, int TM, bool PF>
void q8_tile(float* y, int ldy, const int8_t* xq, const float* xd, int K, const uint8_t* w, size_t row_bytes,
             const float* bias) {
  const int blocks = K / kQ8Block;
  size_t next_line = 0;  // PF: the next 64-byte line of the rows to prefetch
  __m512 acc[TM][Q8_TN];
#pragma GCC unroll 8
  for (int m = 0; m < TM; m++)
#pragma GCC unroll 8
    for (int r = 0; r < Q8_TN; r++) acc[m][r] = _mm512_setzero_ps();
  // One step over the blocks b (and b + 1 unless single): weights and scales of every row, then
  // every token against them.
  auto step = [&](int b, bool single) __attribute__((always_inline)) {  // inlined: `single` folds away
    const size_t at = size_t(b) * kQ8BlockBytes;
    if constexpr (PF)
      prefetch_rows_ahead<Q8_TN>(w, row_bytes, next_line, at + 2 * kQ8BlockBytes, PREFETCH_L1_BYTES, PREFETCH_L2_BYTES);
    __m512i wv[Q8_TN];
    __m512 ws[Q8_TN];
#pragma GCC unroll 8
    for (int r = 0; r < Q8_TN; r++) {
      const uint8_t* pair = w + r * row_bytes + at;
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 2));
      wv[r] = single ? _mm512_zextsi256_si512(lo)
                     : _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + kQ8BlockBytes + 2)), 1);
      ws[r] = scales(scale_bits(pair), single ? 0 : scale_bits(pair + kQ8BlockBytes));
    }
#pragma GCC unroll 8
    for (int m = 0; m < TM; m++) {
      const int8_t* xb = xq + size_t(m) * K + size_t(b) * kQ8Block;
      const __m512i xv = single ? _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb)))
                                : _mm512_loadu_si512(xb);
      const Q8Step s = q8_step<VNNI>(xv);
      const float* d = xd + size_t(m) * blocks + b;
      const __m512 xs = halves(d[0], single ? 0.0f : d[1]);
#pragma GCC unroll 8
      for (int r = 0; r < Q8_TN; r++)
        acc[m][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot_bytes<VNNI>(wv[r], s)), _mm512_mul_ps(ws[r], xs), acc[m][r]);
    }
  };
  int b = 0;
  for (; b + 2 <= blocks; b += 2) step(b, false);
  if (b < blocks) step(b, true);
  store_tile<TM, Q8_TN>(y, ldy, acc, bias);
}

// Tokens m .. m+MT−1 against the Q8_TN rows at w (y: the rows' first column). The first tile
// (m == 0) brings the rows from memory, streamed as the decode streams them; the others find them
// in L1.
template <bool VNNI, int MT>
void q8_tile_at(int m, float* y, int N, const Q8Activations& a, int K, const uint8_t* w, size_t row_bytes,
                const float* bias) {
  float* ym = y + size_t(m) * N;
  const int8_t* xq = a.q + size_t(m) * K;
  const float* xd = a.d + size_t(m) * (K / kQ8Block);
  if (m == 0) q8_tile<VNNI, MT, true>(ym, N, xq, xd, K, w, row_bytes, bias);
  else q8_tile<VNNI, MT, false>(ym, N, xq, xd, K, w, row_bytes, bias);
}

template <bool VNNI>
void q8_gemm(float* y, const Q8Activations& a, const void* W, const float* bias, int M, int K, int N, int n0, int n1) {
  const size_t row_bytes = dtype_bytes(DType::Q8_0, size_t(K));
  const int blocks = K / kQ8Block;
  int n = n0;
  for (; n + Q8_TN <= n1; n += Q8_TN) {
    const uint8_t* w = static_cast<const uint8_t*>(W) + size_t(n) * row_bytes;
    const float* b = bias ? bias + n : nullptr;
    int m = 0;
    for (; m + Q8_TM <= M; m += Q8_TM) q8_tile_at<VNNI, Q8_TM>(m, y + n, N, a, K, w, row_bytes, b);
    switch (M - m) {  // the tokens left, fewer than a tile, in one tile of their own
      case 3: q8_tile_at<VNNI, 3>(m, y + n, N, a, K, w, row_bytes, b); break;
      case 2: q8_tile_at<VNNI, 2>(m, y + n, N, a, K, w, row_bytes, b); break;
      case 1: q8_tile_at<VNNI, 1>(m, y + n, N, a, K, w, row_bytes, b); break;
    }
  }
  for (int m = 0; m < M && n < n1; m++)  // the last rows of the range, fewer than a tile
    q8_rows<Avx512Q8<VNNI>, false>(y + size_t(m) * N, a.q + size_t(m) * K, a.d + size_t(m) * blocks, W, bias, K, n, n1);
}

}  // namespace

bool avx512_vnni_on() { return g_vnni; }
bool set_avx512_vnni(bool on) {
  g_vnni = on && cpu_has_avx512_vnni() && vnni_allowed();
  return g_vnni;
}

void q8_quantize_avx512(const float* x, int8_t* q, float* d, size_t blocks) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (size_t b = 0; b < blocks; b++, x += kQ8Block, q += kQ8Block) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
    const float s = amax / 127.0f, inv = s != 0 ? 1.0f / s : 0.0f;
    d[b] = s;
    const __m512 iv = _mm512_set1_ps(inv);  // |x·inv| ≤ 127: the int32 → int8 narrowing never saturates
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, iv))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16),
                     _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, iv))));
  }
}

void q8_matvec_avx512(float* y, const float* x, const void* W, const float* bias, int K, int n0, int n1) {
  q8_matvec_from_f32(q8_matvec_quantized_avx512, y, x, W, bias, K, n0, n1);
}
void q8_matvec_quantized_avx512(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K,
                                int n0, int n1) {
  if (matvec_order() == MatvecOrder::RowByRow) {
    if (g_vnni) return q8_rows_prepared<true>(y, xq, xd, W, bias, K, n0, n1);
    return q8_rows_prepared<false>(y, xq, xd, W, bias, K, n0, n1);
  }
  if (g_vnni) return q8_matvec_quantized<Avx512Q8<true>>(y, xq, xd, W, bias, K, n0, n1);
  q8_matvec_quantized<Avx512Q8<false>>(y, xq, xd, W, bias, K, n0, n1);
}
void q8_gemm_avx512(float* y, const Q8Activations& a, const void* W, const float* bias, int M, int K, int N, int n0,
                    int n1) {
  if (g_vnni) return q8_gemm<true>(y, a, W, bias, M, K, N, n0, n1);
  q8_gemm<false>(y, a, W, bias, M, K, N, n0, n1);
}

}  // namespace orion::cpu
