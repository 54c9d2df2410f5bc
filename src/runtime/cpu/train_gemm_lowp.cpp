// Mixed-precision training products: C[M, N] += A·B with A and B rounded to bf16 (or fp16), the
// products summed in fp32 (see train_kernels.h, "Low-precision products").
//
// Two paths, the same inputs:
//   - AVX512-BF16 (vdpbf16ps; operands with a unit stride): A and B packed as bf16, each instruction adds two products per fp32
//     lane, acc += a[2p]·b[2p] + a[2p+1]·b[2p+1]. The operands are packed so that a lane's pair is
//     (row i, p and p+1) of A against (p and p+1, column j) of B:
//       A: Ap[i·Kp + p]                        row-major, K padded to Kp (even) with zeros
//       B: panels of 64 columns, Bp[((panel·Kq + q)·64 + c)·2 + (p & 1)], q = p/2, Kq = Kp/2
//     The register tile is gemm_acc's (train_gemm.cpp): 6 rows × 64 columns in 24 zmm; per pair q
//     it loads the panel's 4 vectors (256 contiguous bytes) and broadcasts each row's 32-bit pair.
//   - generic: A and B rounded to bf16/fp16 values kept as fp32, multiplied by cpu::matmul (any ISA)
//     in chunks of rows. A product of two bf16 values is exact in fp32, so both paths differ only in
//     how the sums round (and vdpbf16ps flushes subnormals to zero).
// Either way C[i, j] is summed in an order fixed by the sizes: the result is bit-identical for any
// number of threads.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/line_aligned.h"
#include "base/dtype.h"
#include "runtime/cpu/bf16_weight_packs.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/register_tile.h"
#include "runtime/cpu/c_split.h"
#include "runtime/cpu/train_kernels.h"

#define ORION_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace orion::cpu {
namespace {

constexpr int TM = 6, TJ = 4, TILE_N = 16 * TJ, KQ = 384, NC = 512;  // KQ: pairs of p per K slice (K ≤ 768: one)
constexpr int kBlock = 32;                                           // packing walks 32 × 32 blocks

GemmPrecision g_precision = GemmPrecision::F32;

// Calls f(r, c) for every r < rows, c < cols, in 32 × 32 blocks (both a strided read and a strided
// write then stay within a few cache lines), the row blocks split over threads.
template <typename F>
void blocked_walk(int rows, int cols, F&& f) {
  const int rb = (rows + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (size_t(rows) * cols > (1u << 15))
  for (int b = 0; b < rb; b++) {
    const int r0 = b * kBlock, r1 = std::min(rows, r0 + kBlock);
    for (int c0 = 0; c0 < cols; c0 += kBlock) {
      const int c1 = std::min(cols, c0 + kBlock);
      for (int r = r0; r < r1; r++)
        for (int c = c0; c < c1; c++) f(r, c);
    }
  }
}

uint16_t* scratch16(int i, size_t n) {
  thread_local LineAlignedVector<uint16_t> buf[2];
  if (buf[i].size() < n) buf[i].resize(n);
  return buf[i].data();
}
float* scratch32(int i, size_t n) {
  thread_local LineAlignedVector<float> buf[3];
  if (buf[i].size() < n) buf[i].resize(n);
  return buf[i].data();
}

// --- AVX512-BF16 path ---------------------------------------------------------------------------

// The first n of 16 lanes (all for n ≥ 16, none for n ≤ 0).
inline __mmask16 first(int n) { return n >= 16 ? __mmask16(0xffff) : n > 0 ? __mmask16((1u << n) - 1) : __mmask16(0); }

// C[0..R) × [0..n) += the pairs q0 .. q0+nq of A's rows (row stride kp) against one B panel.
// Without kLoadC, C = those products: the sums start from 0 instead of C's values, which is what
// adding to a zeroed C gives, bit for bit (or from bias[0 .. n) down the columns, as from a C
// filled with the bias). stream: whole aligned lines of C are written with non-temporal stores
// (this is their last write in the product, and a plain store would first read each line).
template <int R, bool kLoadC>
ORION_AVX512BF16 inline void tile_bf16(float* C, size_t ldc, const uint16_t* A, size_t kp, const uint16_t* panel, int n,
                                       int nq, bool stream, const float* bias) {
  __mmask16 mask[TJ];
  tile64::column_masks(n, mask);
  __m512 acc[R][TJ];
  tile64::load<R, kLoadC>(acc, C, ldc, mask, bias);
  for (int q = 0; q < nq; q++) {
    const uint16_t* b = panel + size_t(q) * TILE_N * 2;
    __m512bh bv[TJ];
#pragma GCC unroll 4
    for (int j = 0; j < TJ; j++) bv[j] = (__m512bh)_mm512_loadu_si512(b + 32 * j);
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
      int32_t pair;
      __builtin_memcpy(&pair, A + i * kp + 2 * q, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int j = 0; j < TJ; j++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bv[j]);
    }
  }
  tile64::store<R>(C, ldc, acc, mask, n, stream);
}

template <bool kLoadC>
ORION_AVX512BF16 inline void tile_rows_bf16(int r, float* C, size_t ldc, const uint16_t* A, size_t kp,
                                            const uint16_t* panel, int n, int nq, bool stream, const float* bias) {
  switch (r) {
    case 6: return tile_bf16<6, kLoadC>(C, ldc, A, kp, panel, n, nq, stream, bias);
    case 5: return tile_bf16<5, kLoadC>(C, ldc, A, kp, panel, n, nq, stream, bias);
    case 4: return tile_bf16<4, kLoadC>(C, ldc, A, kp, panel, n, nq, stream, bias);
    case 3: return tile_bf16<3, kLoadC>(C, ldc, A, kp, panel, n, nq, stream, bias);
    case 2: return tile_bf16<2, kLoadC>(C, ldc, A, kp, panel, n, nq, stream, bias);
    default: return tile_bf16<1, kLoadC>(C, ldc, A, kp, panel, n, nq, stream, bias);
  }
}

// Rows [i0, i1) × columns [j_begin, j_end) of C (j_begin a multiple of 64; j_end a multiple of 64 or
// N), walking K slices of KQ pairs and column blocks of NC.
// Overwrite*: C = bias + A·B (the first K slice does not read C; Cold with one slice streams it out).
ORION_AVX512BF16 void rows_bf16(float* C, size_t ldc, const uint16_t* Ap, size_t kp, const uint16_t* Bp, int i0, int i1,
                                int j_begin, int j_end, COut out, const float* bias) {
  const int kq = int(kp / 2);
  for (int q0 = 0; q0 < kq; q0 += KQ) {
    const int nq = std::min(KQ, kq - q0);
    const bool set = out != COut::Accumulate && q0 == 0, stream = set && out == COut::OverwriteCold && nq == kq;
    for (int j0 = j_begin; j0 < j_end; j0 += NC)
      for (int i = i0; i < i1; i += TM) {
        const int r = std::min(TM, i1 - i);
        const uint16_t* a = Ap + size_t(i) * kp + 2 * size_t(q0);
        for (int j = j0; j < std::min(j_end, j0 + NC); j += TILE_N) {
          const int n = std::min(TILE_N, j_end - j);
          const uint16_t* panel = Bp + ((size_t(j / TILE_N) * kq + q0) * TILE_N) * 2;
          float* c = C + size_t(i) * ldc + j;
          if (set) tile_rows_bf16<false>(r, c, ldc, a, kp, panel, n, nq, stream, bias ? bias + j : nullptr);
          else tile_rows_bf16<true>(r, c, ldc, a, kp, panel, n, nq, false, nullptr);
        }
      }
  }
  if (out == COut::OverwriteCold) _mm_sfence();  // this thread's streamed lines are visible before anyone reads C
}

// Two rows' bf16 (vcvtne2ps2bf16: [a₀ … a₁₅ | b₀ … b₁₅]) interleaved into 16 words a_l | b_l << 16.
ORION_AVX512BF16 inline __m512i interleave_pair(__m512 a, __m512 b) {
  const __m512i ab = __m512i(_mm512_cvtne2ps_pbh(b, a));
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5,
                                       20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, ab);
}

// The words of pair q (rows 2q, 2q+1 of X, X(K, ·) = 0) at 16 consecutive o from o0 (mask m).
ORION_AVX512BF16 inline __m512i row_pair_words(const float* src, size_t s_p, int K, int q, int o0, __mmask16 m) {
  if (2 * q >= K) return _mm512_setzero_si512();
  const float* r0 = src + size_t(2 * q) * s_p;
  const __m512 b = 2 * q + 1 < K ? _mm512_maskz_loadu_ps(m, r0 + s_p + o0) : _mm512_setzero_ps();
  return interleave_pair(_mm512_maskz_loadu_ps(m, r0 + o0), b);
}

// The words of pairs q0 .. q0+15 of one contiguous run x[0 .. K) (x[K] = 0): 32 values → 16 words,
// i.e. the 32 values as bf16 in memory order. vcvtne2ps2bf16 rounds to nearest even like
// f32_to_bf16 but flushes fp32 subnormals to zero, which vdpbf16ps does to bf16 subnormals anyway.
ORION_AVX512BF16 inline __m512i col_pair_words(const float* x, int K, int q0) {
  const int p0 = 2 * q0;
  return __m512i(_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(first(K - p0 - 16), x + p0 + 16),
                                     _mm512_maskz_loadu_ps(first(K - p0), x + p0)));
}

// The pair words of an operand: for o < n_other and q < kq,
//   dst[o·d_o + q·d_q] = bf16(X(2q, o)) | bf16(X(2q+1, o)) << 16,   X(p, o) = src[p·s_p + o·s_o]
// (X(K, o) = 0 when K is odd). One of s_p, s_o is 1: the vectors run along it, and the words are
// stored 16 at a time — contiguous, or after a 16 × 16 transpose in registers when the vectors run
// across the destination's rows (then the destination is a B panel: d_o == 1).
ORION_AVX512BF16 void pack_pairs(uint32_t* dst, size_t d_o, size_t d_q, const float* src, size_t s_p, size_t s_o,
                                 int n_other, int K) {
  const int kq = (K + 1) / 2;
  if (s_p == 1 && d_q == 1) {  // 32 consecutive p of one o → 16 contiguous words
    for (int o = 0; o < n_other; o++)
      for (int q0 = 0; q0 < kq; q0 += 16)
        _mm512_mask_storeu_epi32(dst + size_t(o) * d_o + size_t(q0), first(kq - q0), col_pair_words(src + size_t(o) * s_o, K, q0));
    return;
  }
  if (s_p == 1) {  // B panels (d_o == 1): 16 o's words for 16 q, transposed in registers into 16 rows of q
    for (int o0 = 0; o0 < n_other; o0 += 16)
      for (int q0 = 0; q0 < kq; q0 += 16) {
        __m512i r[16];
        for (int t = 0; t < 16; t++)
          r[t] = o0 + t < n_other ? col_pair_words(src + size_t(o0 + t) * s_o, K, q0) : _mm512_setzero_si512();
        tile64::transpose16(r);  // r[t] = the words of q0 + t for o0 .. o0 + 15
        for (int t = 0; t < 16 && q0 + t < kq; t++)
          _mm512_mask_storeu_epi32(dst + size_t(o0) + size_t(q0 + t) * d_q, first(n_other - o0), r[t]);
      }
    return;
  }
  // s_o == 1: rows 2q and 2q+1 over 16 consecutive o → 16 words (one q, 16 o). Stored contiguous
  // when d_o == 1 (B); else (A: d_q == 1) 16 such vectors (16 q) are transposed in registers into
  // 16 rows of 16 q each, which are contiguous in the destination.
  if (d_o == 1) {
    for (int q = 0; q < kq; q++)
      for (int o0 = 0; o0 < n_other; o0 += 16) {
        const __mmask16 m = first(n_other - o0);
        _mm512_mask_storeu_epi32(dst + o0 + size_t(q) * d_q, m, row_pair_words(src, s_p, K, q, o0, m));
      }
    return;
  }
  for (int o0 = 0; o0 < n_other; o0 += 16) {
    const __mmask16 m = first(n_other - o0);
    for (int q0 = 0; q0 < kq; q0 += 16) {
      __m512i r[16];
      for (int t = 0; t < 16; t++) r[t] = row_pair_words(src, s_p, K, q0 + t, o0, m);
      tile64::transpose16(r);  // r[t] = the words of o0 + t for q0 .. q0 + 15
      for (int t = 0; t < 16 && o0 + t < n_other; t++)
        _mm512_mask_storeu_epi32(dst + size_t(o0 + t) * d_o + size_t(q0) * d_q, first(kq - q0), r[t]);
    }
  }
}

// Pairs q0 .. q1−1 of a B whose rows are contiguous, X(p, j) = src[p·s_p + j], into every 64-column
// panel: Bw[(panel·kq + q)·64 + c] = the words of rows 2q, 2q+1 at column panel·64 + c (zero past N).
ORION_AVX512BF16 void pack_row_pairs_into_panels(uint32_t* Bw, size_t kq, const float* src, size_t s_p, int N, int K,
                                                 int q0, int q1) {
  constexpr int kAhead = 2;  // row pairs fetched ahead: the two rows' streams alone leave ~40% idle
  const int padded = (N + TILE_N - 1) / TILE_N * TILE_N;
  for (int q = q0; q < q1; q++)
    for (int o0 = 0; o0 < padded; o0 += 16) {
      if (2 * (q + kAhead) + 1 < K) {  // (a prefetch never faults; this only keeps it inside src)
        _mm_prefetch(reinterpret_cast<const char*>(src + size_t(2 * (q + kAhead)) * s_p + o0), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(src + size_t(2 * (q + kAhead) + 1) * s_p + o0), _MM_HINT_T0);
      }
      uint32_t* d = Bw + (size_t(o0 / TILE_N) * kq + size_t(q)) * TILE_N + o0 % TILE_N;
      _mm512_storeu_si512(d, row_pair_words(src, s_p, K, q, o0, first(N - o0)));
    }
}

// kept: B already packed (a kept weight pack, bf16_weight_packs.h), or null to pack it here.
void gemm_bf16_dot(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t rsb, size_t csb,
                   int M, int N, int K, const uint32_t* kept, COut out, const float* bias) {
  const size_t kp = size_t(K + 1) / 2 * 2, kq = kp / 2;
  const int panels = kept ? 0 : (N + TILE_N - 1) / TILE_N;
  uint16_t* Ap = scratch16(0, size_t(M) * kp);
  uint16_t* Bp = kept ? const_cast<uint16_t*>(reinterpret_cast<const uint16_t*>(kept))
                      : scratch16(1, size_t(panels) * kq * TILE_N * 2);
  uint32_t* Aw = reinterpret_cast<uint32_t*>(Ap);
  uint32_t* Bw = reinterpret_cast<uint32_t*>(Bp);
  const bool big = double(M) * N * K >= 1e6;  // smaller: not worth waking threads
  // A: row i's pairs at Aw[i·kq + q], 64 rows per task. B: when its rows are contiguous (B(p, j) =
  // B[p·rsb + j], the weight of dx = dy·W), 16 row pairs per task, each pair written into every
  // panel, so that W is read front to back; else panel by panel (64 columns of every row). Columns
  // past N are zero.
  const int a_tasks = (M + 63) / 64;
  const bool b_by_rows = !kept && csb == 1 && rsb != 1;
  const int b_tasks = kept ? 0 : b_by_rows ? int((kq + 15) / 16) : panels;
#pragma omp parallel for schedule(dynamic, 1) if (big)  // (tasks of unequal sizes: taken as threads free up)
  for (int t = 0; t < a_tasks + b_tasks; t++) {
    if (t < a_tasks) {
      const int i0 = t * 64, n = std::min(64, M - i0);
      pack_pairs(Aw + size_t(i0) * kq, kq, 1, A + size_t(i0) * rsa, csa, rsa, n, K);
      continue;
    }
    if (b_by_rows) {
      const int q0 = (t - a_tasks) * 16, q1 = std::min(int(kq), q0 + 16);
      pack_row_pairs_into_panels(Bw, kq, B, rsb, N, K, q0, q1);
      continue;
    }
    const int q = t - a_tasks, j0 = q * TILE_N, n = std::min(TILE_N, N - j0);
    uint32_t* panel = Bw + size_t(q) * kq * TILE_N;
    if (n < TILE_N)
      for (size_t p = 0; p < kq; p++) std::fill_n(panel + p * TILE_N + n, TILE_N - n, 0u);
    pack_pairs(panel, 1, TILE_N, B + size_t(j0) * csb, rsb, csb, n, K);
  }
  // The work over threads. A tall C (dW: a weight's rows × its columns, B = x small and kept in
  // cache): its row tiles in ~8 tasks per thread taken dynamically, so that a thread that runs slower
  // (a busy neighbour on a shared machine) takes fewer instead of the other waiting for it. Few row
  // tiles (y = x·Wᵀ, dx = dy·W for a batch of a few hundred tokens): B's panels, an equal run per
  // thread (c_split.h). Else half the rows each. Every C element is summed by one tile in the
  // same order either way.
  const int tiles = (M + TM - 1) / TM, threads = big ? omp_get_max_threads() : 1;
  const bool tall = M >= 2 * N && tiles >= 16 * threads;
  if (tall || !c_split::by_panels(tiles, (N + TILE_N - 1) / TILE_N, threads)) {
    const int per = tall ? tiles / (8 * threads) : (tiles + threads - 1) / threads, tasks = (tiles + per - 1) / per;
#pragma omp parallel for schedule(dynamic, 1) if (big)
    for (int t = 0; t < tasks; t++) {
      const int i0 = std::min(M, t * per * TM), i1 = std::min(M, (t + 1) * per * TM);
      if (i0 < i1) rows_bf16(C, ldc, Ap, kp, Bp, i0, i1, 0, N, out, bias);
    }
    return;
  }
#pragma omp parallel if (big)
  {
    int j_begin, j_end;
    thread_share(N, TILE_N, &j_begin, &j_end);
    if (j_begin < j_end) rows_bf16(C, ldc, Ap, kp, Bp, 0, M, j_begin, j_end, out, bias);
  }
}

// Both kept layouts of a weight W [N, K] in one pass over it (bf16_weight_packs.h):
//   rows: the B panels of y = x·Wᵀ,  B(k, n) = W[n, k]: rows[(n/64·kqK + k/2)·64 + n%64], kqK = ⌈K/2⌉
//   cols: the B panels of dx = dy·W, B(n, k) = W[n, k]: cols[(k/64·kqN + n/2)·64 + k%64], kqN = ⌈N/2⌉
// (each word a pair of bf16, the even index in the low half; zero past N and K) — the same bytes
// gemm_bf16_dot packs from W. 16 rows × 32 columns are loaded at a time: their 16 rows of pair words
// transposed into 16 pairs of 16 rows (rows layout), and their 8 row pairs interleaved (cols layout).
// stream: both outputs 64-byte aligned, written with non-temporal stores (they are read only at the
// next step's products, long after this pass has left the caches; a plain store would first read
// every line of the 4 bytes per weight it overwrites).
template <bool stream>
ORION_AVX512BF16 inline void store_line(uint32_t* d, __m512i v) {
  if constexpr (stream) _mm512_stream_si512(reinterpret_cast<__m512i*>(d), v);
  else _mm512_storeu_si512(d, v);
}

template <bool stream>
ORION_AVX512BF16 void pack_weight_block(const float* W, int N, int K, uint32_t* rows, uint32_t* cols, int r0) {
  const size_t kqK = size_t(K + 1) / 2, kqN = size_t(N + 1) / 2;
  const int padded_k = (K + TILE_N - 1) / TILE_N * TILE_N;
  for (int k0 = 0; k0 < padded_k; k0 += 32) {
    __m512 a[16][2];
    for (int t = 0; t < 16; t++)
      for (int h = 0; h < 2; h++)
        a[t][h] = r0 + t < N ? _mm512_maskz_loadu_ps(first(K - k0 - 16 * h), W + size_t(r0 + t) * K + k0 + 16 * h)
                             : _mm512_setzero_ps();
    if (size_t(k0 / 2) < kqK) {
      __m512i w[16];
      for (int t = 0; t < 16; t++) w[t] = __m512i(_mm512_cvtne2ps_pbh(a[t][1], a[t][0]));
      tile64::transpose16(w);  // w[j] = pair k0/2 + j of rows r0 .. r0+15
      uint32_t* d = rows + (size_t(r0 / TILE_N) * kqK + size_t(k0 / 2)) * TILE_N + r0 % TILE_N;
      for (int j = 0; j < 16 && size_t(k0 / 2 + j) < kqK; j++) store_line<stream>(d + size_t(j) * TILE_N, w[j]);
    }
    for (int i = 0; i < 8 && size_t(r0 / 2 + i) < kqN; i++)
      for (int h = 0; h < 2; h++) {
        const int c = k0 + 16 * h;
        uint32_t* d = cols + (size_t(c / TILE_N) * kqN + size_t(r0 / 2 + i)) * TILE_N + c % TILE_N;
        store_line<stream>(d, interleave_pair(a[2 * i][h], a[2 * i + 1][h]));
      }
  }
}

// --- generic path -------------------------------------------------------------------------------

float round_to(GemmPrecision p, float x) {
  if (p == GemmPrecision::F32) return x;
  return p == GemmPrecision::F16 ? f16_to_f32(f32_to_f16(x)) : bf16_to_f32(f32_to_bf16(x));
}

// Rows of A in chunks (the scratch stays small for a 50257-row dW), each chunk one cpu::matmul.
void gemm_rounded_generic(GemmPrecision prec, float* C, size_t ldc, const float* A, size_t rsa, size_t csa,
                          const float* B, size_t rsb, size_t csb, int M, int N, int K) {
  constexpr int kRows = 1024;
  float* Bt = scratch32(0, size_t(N) * K);  // [N, K]: cpu::matmul's weight layout
  blocked_walk(N, K, [&](int j, int p) { Bt[size_t(j) * K + p] = round_to(prec, B[p * rsb + j * csb]); });
  const int ch = std::min(M, kRows);
  float* Ar = scratch32(1, size_t(ch) * K);
  float* tmp = scratch32(2, size_t(ch) * N);
  for (int m0 = 0; m0 < M; m0 += ch) {
    const int m = std::min(ch, M - m0);
    blocked_walk(m, K, [&](int i, int p) { Ar[size_t(i) * K + p] = round_to(prec, A[(m0 + i) * rsa + p * csa]); });
    matmul(tmp, Ar, Bt, DType::F32, nullptr, m, K, N);
#pragma omp parallel for schedule(static) if (size_t(m) * N > (1u << 15))
    for (int i = 0; i < m; i++) {
      float* c = C + size_t(m0 + i) * ldc;
      const float* t = tmp + size_t(i) * N;
#pragma omp simd
      for (int j = 0; j < N; j++) c[j] += t[j];
    }
  }
}

}  // namespace

void set_train_gemm_precision(GemmPrecision p) {
  if (p != g_precision) drop_weight_packs();  // packs made under one precision are not refreshed under another
  g_precision = p;
}
GemmPrecision train_gemm_precision() { return g_precision; }

bool bf16_dot_available() {
  static const bool cpu = __builtin_cpu_supports("avx512bf16");
  return cpu && active_isa() == Isa::Avx512;
}

size_t kept_pack_words(int N, int K, KeptLayout layout) {
  const size_t rows = size_t((N + TILE_N - 1) / TILE_N) * size_t((K + 1) / 2) * TILE_N;
  const size_t cols = size_t((K + TILE_N - 1) / TILE_N) * size_t((N + 1) / 2) * TILE_N;
  return layout == KeptLayout::Rows ? rows : cols;
}

void pack_weight_bf16(const float* W, int N, int K, uint32_t* rows, uint32_t* cols) {
  const int blocks = (N + TILE_N - 1) / TILE_N;  // 64 rows: one rows-layout panel, 32 cols-layout pairs
#pragma omp parallel for schedule(static)
  for (int b = 0; b < blocks; b++) pack_weight_bf16_rows(W, N, K, rows, cols, b * TILE_N, (b + 1) * TILE_N);
}

void pack_weight_bf16_rows(const float* W, int N, int K, uint32_t* rows, uint32_t* cols, int r0, int r1) {
  const bool stream = reinterpret_cast<uintptr_t>(rows) % 64 == 0 && reinterpret_cast<uintptr_t>(cols) % 64 == 0;
  for (int r = r0; r < r1; r += 16) {
    if (stream) pack_weight_block<true>(W, N, K, rows, cols, r);
    else pack_weight_block<false>(W, N, K, rows, cols, r);
  }
  _mm_sfence();  // the streamed lines are visible before the products (on any thread) read them
}

void gemm_acc_bf16_kept(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const uint32_t* kept, int M,
                        int N, int K, COut out, const float* bias) {
  gemm_bf16_dot(C, ldc, A, rsa, csa, nullptr, 0, 0, M, N, K, kept, out, bias);
}

void gemm_acc_lowp(GemmPrecision prec, LowpPath path, float* C, size_t ldc, const float* A, size_t rsa, size_t csa,
                   const float* B, size_t rsb, size_t csb, int M, int N, int K, COut out, const float* bias) {
  if (M <= 0 || N <= 0 || K <= 0) return;
  const bool unit_strides = (rsa == 1 || csa == 1) && (rsb == 1 || csb == 1);  // what pack_pairs reads
  const bool dot = prec == GemmPrecision::BF16 && path != LowpPath::Generic && unit_strides && bf16_dot_available();
  if (dot) return gemm_bf16_dot(C, ldc, A, rsa, csa, B, rsb, csb, M, N, K, nullptr, out, bias);
  if (out != COut::Accumulate) fill_rows(C, ldc, M, N, bias);
  gemm_rounded_generic(prec, C, ldc, A, rsa, csa, B, rsb, csb, M, N, K);
}

}  // namespace orion::cpu
