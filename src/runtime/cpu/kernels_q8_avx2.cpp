// AVX2 kernels for q8_0 weights (kernels_q8.h): decode rows and prefill tiles, with AVX-VNNI where
// the CPU has it. Compiled with -mavx2 -mfma -mf16c -mavxvnni (src/CMakeLists.txt) and only called
// when the CPU has AVX2 (dispatch.cpp); kernels_avx2.cpp's table points here.
#include <immintrin.h>

#include "runtime/cpu/kernels_q8.h"
#include "runtime/cpu/lanes_avx2.h"

namespace orion::cpu {
namespace {

using lanes_avx2::store_tile;
using lanes_avx2::sum_of;

// One 32-byte block of a weight row per step; the products are signed × signed bytes.
//  - AVX-VNNI (vpdpbusd, VEX-encoded): unsigned × signed bytes summed in groups of 4 into 8 int32.
//    q_w ^ 0x80 is q_w + 128 as an unsigned byte, so starting the sum at −128·Σ q_x (once per block,
//    shared by all rows) leaves Σ q_w·q_x (kernels_q8_avx512.cpp does the same with 16 lanes).
//  - plain AVX2: vpmaddubsw multiplies unsigned by signed bytes, so the sign moves onto the
//    activations: q_w·q_x = |q_w|·(sign(q_w)·q_x), with vpabsb and vpsignb. vpmaddubsw sums
//    adjacent pairs into int16 (at most 2·127·127 = 32258: it never saturates), and vpmaddwd with
//    ones sums those pairs into 8 int32.
// Either way the block's dot product, exact; the AVX-VNNI one is chosen when the CPU has it.

bool g_vnni = cpu_has_avx_vnni() && vnni_allowed();

inline float block_scale(const uint8_t* block) {
  uint16_t d;
  __builtin_memcpy(&d, block, 2);
  return _cvtsh_ss(d);
}

// A q8_0 row's blocks are summed as the groups of 8 above: block b into accumulator b mod 2, the
// row's sum sum_of(a0 + a1) — two FMA chains per row (decode, prefill and batched tiles alike). With
// one, a row read on its own (MatvecOrder::RowByRow) waited on one FMA per 32-byte block.
template <bool VNNI>
struct Avx2Q8 {
  static constexpr int kRows = 4;
  template <int R, bool PF>
  static void block(float* y, const int8_t* xq, const float* xd, const uint8_t* w, size_t row_bytes, int blocks,
                    const float* bias) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    size_t next_line = 0;  // the next 64-byte line (offset within a row) to prefetch
    // Block b of every row into accumulator a.
    auto step = [&](int b, int a) __attribute__((always_inline)) {
      const size_t at = size_t(b) * kQ8BlockBytes;
      if constexpr (PF)
        prefetch_rows_ahead<R>(w, row_bytes, next_line, at + kQ8BlockBytes, PREFETCH_L1_BYTES, PREFETCH_L2_BYTES);
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + size_t(b) * kQ8Block));
      __m256i start = _mm256_setzero_si256();  // −128·Σ q_x per group of 4 (VNNI)
      if constexpr (VNNI)
        start = _mm256_sub_epi32(start, _mm256_dpbusd_avx_epi32(start, _mm256_set1_epi8(char(0x80)), xv));
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        const uint8_t* blk = w + r * row_bytes + at;
        const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        __m256i sums;
        if constexpr (VNNI) {
          sums = _mm256_dpbusd_avx_epi32(start, _mm256_xor_si256(wv, _mm256_set1_epi8(char(0x80))), xv);
        } else {
          const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
          sums = _mm256_madd_epi16(pairs, ones);
        }
        const __m256 dot = _mm256_cvtepi32_ps(sums);
        acc[r][a] = _mm256_fmadd_ps(dot, _mm256_set1_ps(block_scale(blk) * xd[b]), acc[r][a]);
      }
    };
    int b = 0;
    for (; b + 2 <= blocks; b += 2) step(b, 0), step(b + 1, 1);
    if (b < blocks) step(b, 0);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const float s = sum_of(_mm256_add_ps(acc[r][0], acc[r][1]));
      y[r] = bias ? s + bias[r] : s;
    }
  }
};

// Prefill: a tile of TM tokens × TN weight rows per block, so each row's block (its bytes, |w|
// without VNNI, and its scale) is loaded once for TM tokens instead of once per token. 3 × 2 fits
// the 16 ymm registers: 6 sums, 2 rows' bytes (and |w|), 2 scales, a token's vectors. Every
// (token, row) sum is the same sequence of operations as Avx2Q8::block's (the scale d_w·d_x as
// one fp32 product, FMAed into accumulator b mod 2, sum_of(a0 + a1), + bias), so prefill and decode
// agree bit for bit.
constexpr int Q8_TM = 3, Q8_TN = 2;  // (q8_tile_rows' leftover tiles assume Q8_TM ≤ 3)
static_assert(Q8_TM <= 3);

template <bool VNNI, int TM, int TN, bool PF>
void q8_tile(float* y, int ldy, const int8_t* xq, const float* xd, int K, const uint8_t* w, size_t row_bytes,
             const float* bias) {
  const int blocks = K / kQ8Block;
  size_t next_line = 0;  // PF: the next 64-byte line of the rows to prefetch
  const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(char(0x80));
  __m256 acc[TM][TN];
#pragma GCC unroll 4
  for (int m = 0; m < TM; m++)
#pragma GCC unroll 4
    for (int r = 0; r < TN; r++) acc[m][r] = _mm256_setzero_ps();
  // Block b of every row against every token.
  auto step = [&](int b) __attribute__((always_inline)) {
    const size_t at = size_t(b) * kQ8BlockBytes;
    if constexpr (PF)
      prefetch_rows_ahead<TN>(w, row_bytes, next_line, at + kQ8BlockBytes, PREFETCH_L1_BYTES, PREFETCH_L2_BYTES);
    __m256i wv[TN], aw[TN];  // VNNI: w ^ 0x80 (w + 128 unsigned); else w and |w|
    __m256 ws[TN];
#pragma GCC unroll 4
    for (int r = 0; r < TN; r++) {
      const uint8_t* blk = w + r * row_bytes + at;
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
      wv[r] = VNNI ? _mm256_xor_si256(v, flip) : v;
      aw[r] = VNNI ? v : _mm256_sign_epi8(v, v);
      ws[r] = _mm256_set1_ps(block_scale(blk));
    }
#pragma GCC unroll 4
    for (int m = 0; m < TM; m++) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + size_t(m) * K + size_t(b) * kQ8Block));
      __m256i start = _mm256_setzero_si256();
      if constexpr (VNNI) start = _mm256_sub_epi32(start, _mm256_dpbusd_avx_epi32(start, flip, xv));
      const __m256 xs = _mm256_set1_ps(xd[size_t(m) * blocks + b]);
#pragma GCC unroll 4
      for (int r = 0; r < TN; r++) {
        __m256i sums;
        if constexpr (VNNI) sums = _mm256_dpbusd_avx_epi32(start, wv[r], xv);
        else sums = _mm256_madd_epi16(_mm256_maddubs_epi16(aw[r], _mm256_sign_epi8(xv, wv[r])), ones);
        acc[m][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(ws[r], xs), acc[m][r]);
      }
    }
  };
  // The even blocks with one accumulator set, then the odd ones, the even sums waiting meanwhile
  // (both sets would not fit the registers beside the rows' and tokens' vectors).
  __m256 even[TM][TN];
  for (int b = 0; b < blocks; b += 2) step(b);
#pragma GCC unroll 4
  for (int m = 0; m < TM; m++)
#pragma GCC unroll 4
    for (int r = 0; r < TN; r++) even[m][r] = acc[m][r], acc[m][r] = _mm256_setzero_ps();
  for (int b = 1; b < blocks; b += 2) step(b);
#pragma GCC unroll 4
  for (int m = 0; m < TM; m++)
#pragma GCC unroll 4
    for (int r = 0; r < TN; r++) acc[m][r] = _mm256_add_ps(even[m][r], acc[m][r]);
  store_tile<TM, TN>(y, ldy, acc, bias);
}

// Tokens m .. m+MT−1 against the TN rows at w (y: the rows' first column). The first tile (m == 0)
// brings the rows from memory, streamed as the decode streams them; the others find them in L1.
template <bool VNNI, int MT, int TN>
void q8_tile_at(int m, float* y, int N, const Q8Activations& a, int K, const uint8_t* w, size_t row_bytes,
                const float* bias) {
  float* ym = y + size_t(m) * N;
  const int8_t* xq = a.q + size_t(m) * K;
  const float* xd = a.d + size_t(m) * (K / kQ8Block);
  if (m == 0) q8_tile<VNNI, MT, TN, true>(ym, N, xq, xd, K, w, row_bytes, bias);
  else q8_tile<VNNI, MT, TN, false>(ym, N, xq, xd, K, w, row_bytes, bias);
}

// All M tokens against TN weight rows from n (each tile of TM tokens, then the tokens left, fewer
// than a tile, in one tile of their own).
template <bool VNNI, int TN>
void q8_tile_rows(float* y, const Q8Activations& a, const uint8_t* w, size_t row_bytes, const float* bias, int M, int K,
                  int N) {
  int m = 0;
  for (; m + Q8_TM <= M; m += Q8_TM) q8_tile_at<VNNI, Q8_TM, TN>(m, y, N, a, K, w, row_bytes, bias);
  switch (M - m) {
    case 2: q8_tile_at<VNNI, 2, TN>(m, y, N, a, K, w, row_bytes, bias); break;
    case 1: q8_tile_at<VNNI, 1, TN>(m, y, N, a, K, w, row_bytes, bias); break;
  }
}

template <bool VNNI>
void q8_gemm(float* y, const Q8Activations& a, const void* W, const float* bias, int M, int K, int N, int n0, int n1) {
  const size_t row_bytes = dtype_bytes(DType::Q8_0, size_t(K));
  const uint8_t* w = static_cast<const uint8_t*>(W);
  int n = n0;
  for (; n + Q8_TN <= n1; n += Q8_TN)
    q8_tile_rows<VNNI, Q8_TN>(y + n, a, w + size_t(n) * row_bytes, row_bytes, bias ? bias + n : nullptr, M, K, N);
  for (; n < n1; n++) q8_tile_rows<VNNI, 1>(y + n, a, w + size_t(n) * row_bytes, row_bytes, bias ? bias + n : nullptr, M, K, N);
}

}  // namespace

bool avx2_vnni_on() { return g_vnni; }
bool set_avx2_vnni(bool on) {
  g_vnni = on && cpu_has_avx_vnni() && vnni_allowed();
  return g_vnni;
}

void q8_quantize_avx2(const float* x, int8_t* q, float* d, size_t blocks) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (size_t b = 0; b < blocks; b++, x += kQ8Block, q += kQ8Block) {
    __m256 v[4];
    for (int j = 0; j < 4; j++) v[j] = _mm256_loadu_ps(x + 8 * j);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
    const float s = amax / 127.0f, inv = s != 0 ? 1.0f / s : 0.0f;
    d[b] = s;
    const __m256 iv = _mm256_set1_ps(inv);
    __m256i i[4];
    for (int j = 0; j < 4; j++) i[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], iv));  // nearest even
    // Narrow 4 × 8 int32 to 32 int8: the packs work within 128-bit lanes, leaving 4-value groups in
    // the order 0 2 4 6 1 3 5 7 of the 8 groups; the permute puts them back.
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
}

void q8_matvec_avx2(float* y, const float* x, const void* W, const float* bias, int K, int n0, int n1) {
  q8_matvec_from_f32(q8_matvec_quantized_avx2, y, x, W, bias, K, n0, n1);
}
void q8_matvec_quantized_avx2(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K,
                              int n0, int n1) {
  if (g_vnni) return q8_matvec_quantized<Avx2Q8<true>>(y, xq, xd, W, bias, K, n0, n1);
  q8_matvec_quantized<Avx2Q8<false>>(y, xq, xd, W, bias, K, n0, n1);
}
void q8_gemm_avx2(float* y, const Q8Activations& a, const void* W, const float* bias, int M, int K, int N, int n0, int n1) {
  if (g_vnni) return q8_gemm<true>(y, a, W, bias, M, K, N, n0, n1);
  q8_gemm<false>(y, a, W, bias, M, K, N, n0, n1);
}

}  // namespace orion::cpu
