// The two backward products of a linear layer without transposes: C[M, N] += A(M×K)·B[K, N]
// (or C = A·B: COut::Overwrite*, train_kernels.h).
//
//   dx[M, K] += dy[M, N]·W[N, K]     A = dy (row i = token),             B = W
//   dW[N, K] += dy[M, N]ᵀ·x[M, K]    A(i, p) = dy[p, i] (read strided),  B = x
//
// A is addressed as A[i·rsa + p·csa], so dyᵀ needs no copy. B and C are row-major.
//
// The register tile (AVX-512; the AVX2 one, 6 × 16, is train_gemm_avx2.cpp, both behind
// train_gemm_tiles.h): TM = 6 rows × 64 columns of C in 24 zmm accumulators. For each p
// it loads B[p, j..j+63] (4 vectors) and broadcasts A(i, p) for the 6 rows: 24 FMAs for 4 loads and
// 6 broadcasts ("outer product" form, as BLAS kernels do; cpu::matmul's dot-product tiles need a
// horizontal sum per output instead). Blocking: K in slices of KC = 256 and N in blocks of
// NC = 512 columns, so a block of B (256 × 512 floats, 512 KB) stays in L2 while every row tile of
// this thread passes over it; within a row tile the column tiles run innermost so A's 6 × 256
// values stay in L1. The block of B is first copied into 64-column panels (pack_b) when the thread
// has ≥ 4 row tiles: each tile then streams 256 contiguous bytes per p (15–20% less CPU time in a
// GPT-2 124M backward).
//
// Determinism: C[i, j] is one chain of FMAs, c ← c + A(i, p)·B[p, j] for p = 0, 1, …, K−1 in
// order. Storing C between K slices does not change a bit, and which thread owns row i does not
// either, so the result is the same for any number of threads.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "base/line_aligned.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/register_tile.h"
#include "runtime/cpu/c_split.h"
#include "runtime/cpu/train_gemm_tiles.h"
#include "runtime/cpu/train_kernels.h"

#define ORION_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

// GCC 12's AVX-512 headers self-initialise a dummy operand (GCC bug 105593); nothing in this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace orion::cpu {
namespace {

using gemm_tiles::TM, gemm_tiles::KC, gemm_tiles::NC;
constexpr int TJ = 4, TILE_N = 16 * TJ;
constexpr int kPackMinRows = 4 * TM;  // rows of C per thread from which B blocks are packed

// C[0..R) × [0..n) += A(i, p)·B[p, ·] for p < k, with n ≤ 64 (masked vectors past n). Without
// kLoadC, C = those products (each chain starts from 0, as it would from a zeroed C); stream:
// whole aligned lines of C go out with non-temporal stores (their last write in this product).
template <int R, bool kLoadC>
ORION_AVX512 inline void tile(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t ldb,
                              int n, int k, bool stream) {
  __mmask16 mask[TJ];
  tile64::column_masks(n, mask);
  __m512 acc[R][TJ];
  tile64::load<R, kLoadC>(acc, C, ldc, mask, nullptr);
  for (int p = 0; p < k; p++) {
    const float* b = B + size_t(p) * ldb;
    const float* a = A + size_t(p) * csa;
    __m512 bv[TJ];
#pragma GCC unroll 4
    for (int j = 0; j < TJ; j++) bv[j] = _mm512_maskz_loadu_ps(mask[j], b + 16 * j);
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
      const __m512 av = _mm512_set1_ps(a[i * rsa]);
#pragma GCC unroll 4
      for (int j = 0; j < TJ; j++) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  tile64::store<R>(C, ldc, acc, mask, n, stream);
}

// B[0..k) × [0..N) copied as column panels of TILE_N: panel q holds B[p, 64q .. 64q+63] at
// pk[(q·k + p)·64 ..] (zero past N), so a tile then reads its 64 columns of every p as one
// sequential stream instead of 4 cache lines ldb floats apart (which the prefetchers follow badly).
ORION_AVX512 void pack_b(float* pk, const float* B, size_t ldb, int N, int k) {
  for (int q = 0; q * TILE_N < N; q++) {
    const int j = q * TILE_N, n = std::min(TILE_N, N - j);
    for (int p = 0; p < k; p++) {
      float* dst = pk + (size_t(q) * k + p) * TILE_N;
      const float* src = B + size_t(p) * ldb + j;
      for (int c = 0; c < TILE_N; c += 16) {
        const int left = n - c;
        const __mmask16 m = left >= 16 ? __mmask16(0xffff) : left > 0 ? __mmask16((1u << left) - 1) : __mmask16(0);
        _mm512_storeu_ps(dst + c, _mm512_maskz_loadu_ps(m, src + c));
      }
    }
  }
}

// The same panels from B given as its transpose, B(p, j) = Bt[j·ldbt + p] (the weight W [N, K] of
// y = x·Wᵀ): 16 rows of Bt × 16 p loaded, transposed in registers (tile64::transpose16) into 16 p ×
// 16 columns, each stored as a quarter of a panel row. Bt is read row by row (16 runs of k floats).
ORION_AVX512 void pack_bt(float* pk, const float* Bt, size_t ldbt, int N, int k) {
  for (int j0 = 0; j0 < (N + TILE_N - 1) / TILE_N * TILE_N; j0 += 16)
    for (int p0 = 0; p0 < k; p0 += 16) {
      const int left = k - p0;
      const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
      __m512i r[16];
      for (int t = 0; t < 16; t++)
        r[t] = j0 + t < N ? _mm512_castps_si512(_mm512_maskz_loadu_ps(m, Bt + size_t(j0 + t) * ldbt + p0))
                          : _mm512_setzero_si512();
      tile64::transpose16(r);  // r[u] = B(p0 + u, j0 .. j0+15)
      float* dst = pk + (size_t(j0 / TILE_N) * k + p0) * TILE_N + j0 % TILE_N;
      for (int u = 0; u < 16 && u < left; u++) _mm512_storeu_ps(dst + size_t(u) * TILE_N, _mm512_castsi512_ps(r[u]));
    }
}

template <bool kLoadC>
ORION_AVX512 inline void tile_rows(int r, float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B,
                                   size_t ldb, int n, int k, bool stream) {
  switch (r) {
    case 6: return tile<6, kLoadC>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
    case 5: return tile<5, kLoadC>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
    case 4: return tile<4, kLoadC>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
    case 3: return tile<3, kLoadC>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
    case 2: return tile<2, kLoadC>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
    default: return tile<1, kLoadC>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
  }
}

// Rows [0, m) × columns [0, N) of C (N ≤ NC), one K slice of length k. B is either row-major
// (pk == nullptr) or packed by pack_b into pk. set: C = this slice's products (the first slice of
// an overwriting product); stream: and it is the only slice.
void block(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t ldb, const float* pk,
           int m, int N, int k, bool set, bool stream) {
  gemm_tiles::for_each_tile<TILE_N>(C, ldc, A, rsa, B, ldb, pk, m, N, k,
                                    [&](int r, float* c, const float* a, const float* b, size_t lb, int n) {
                                      if (set) tile_rows<false>(r, c, ldc, a, rsa, csa, b, lb, n, k, stream);
                                      else tile_rows<true>(r, c, ldc, a, rsa, csa, b, lb, n, k, false);
                                    });
}

}  // namespace

const gemm_tiles::TileSet gemm_tiles::kAvx512 = {TILE_N, pack_b, pack_bt, block};

bool gemm_acc_available() { return active_isa() != Isa::Generic; }

namespace {
// gemm_acc and gemm_acc_bt: B row-major (B(p, j) = B[p·ldb + j]) or, with bt, given as its
// transpose (B(p, j) = B[j·ldb + p]; every block is then packed, through pack_bt).
void gemm_acc_driver(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t ldb, bool bt,
                     int M, int N, int K, COut out) {
  const gemm_tiles::TileSet& set = active_isa() == Isa::Avx512 ? gemm_tiles::kAvx512 : gemm_tiles::kAvx2;
  const int tiles = (M + TM - 1) / TM, panels = (N + set.tile_n - 1) / set.tile_n;
  const bool big = double(M) * N * K >= 1e6;  // smaller: not worth waking threads
#pragma omp parallel if (big)
  {
    // Each thread owns a contiguous range of C and walks the K slices over it: a range of row tiles,
    // or of B's column panels for all rows when the row tiles are few (c_split.h).
    const int nt = omp_get_num_threads();
    const bool by_rows = !c_split::by_panels(tiles, panels, nt);
    int i0 = 0, i1 = M, j_begin = 0, j_end = N;
    if (by_rows) thread_share(M, TM, &i0, &i1);
    else thread_share(N, set.tile_n, &j_begin, &j_end);
    // A block of B is packed (by each thread, for its own part of C) when enough row tiles reuse it
    // to repay the copy; the products are the same FMA chains either way.
    thread_local LineAlignedVector<float> pk;  // (on a line: the kernels load its panels whole)
    const bool pack = bt || i1 - i0 >= kPackMinRows;
    if (pack && pk.size() < size_t(KC) * NC) pk.resize(size_t(KC) * NC);
    // By rows: the K slices outermost (this thread's rows of C are many; B's block, packed once per
    // slice and column block, serves them all). By panels (C's rows are few): the column blocks
    // outermost, so that a block of C (a few hundred rows × NC, in L2) takes all its K slices before
    // the next — a wide C (the logits: 256 × 50 K) is not read and written from memory per slice.
    const int slices = (K + KC - 1) / KC, blocks = (j_end - j_begin + NC - 1) / NC;
    for (int step = 0; step < slices * blocks && i0 < i1; step++) {
      const int s = by_rows ? step / blocks : step % slices, c = by_rows ? step % blocks : step / slices;
      const int p0 = s * KC, j0 = j_begin + c * NC;
      const int n = std::min(NC, j_end - j0), k = std::min(KC, K - p0);
      const float* b = bt ? B + size_t(j0) * ldb + p0 : B + size_t(p0) * ldb + j0;
      if (bt) set.pack_bt(pk.data(), b, ldb, n, k);
      else if (pack) set.pack_b(pk.data(), b, ldb, n, k);
      const bool first = out != COut::Accumulate && p0 == 0;
      set.block(C + size_t(i0) * ldc + j0, ldc, A + size_t(i0) * rsa + size_t(p0) * csa, rsa, csa, b, ldb,
                pack ? pk.data() : nullptr, i1 - i0, n, k, first, first && out == COut::OverwriteCold && k == K);
    }
    if (out == COut::OverwriteCold) _mm_sfence();  // this thread's streamed lines are visible to the others
  }
}
}  // namespace

void gemm_acc(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t ldb, int M, int N,
              int K, COut out) {
  gemm_acc_driver(C, ldc, A, rsa, csa, B, ldb, false, M, N, K, out);
}

void gemm_acc_bt(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* Bt, size_t ldbt, int M, int N,
                 int K, COut out) {
  gemm_acc_driver(C, ldc, A, rsa, csa, Bt, ldbt, true, M, N, K, out);
}

}  // namespace orion::cpu
