// gemm_acc's register tile for AVX2 + FMA (8 fp32 lanes, 16 ymm registers): the classic 6 × 16
// BLAS tile. For each p it loads B[p, j..j+15] (2 vectors) and broadcasts A(i, p) for the 6 rows:
// 12 FMAs into 12 accumulators for 2 loads and 6 broadcasts, 15 of the 16 registers in use.
// Everything else — slicing, blocking, threads — is the driver's (train_gemm.cpp), and each
// C[i, j] is the same FMA chain as on the AVX-512 tile, so both give the same bits.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "runtime/cpu/lanes_avx2.h"
#include "runtime/cpu/train_gemm_tiles.h"

namespace orion::cpu::gemm_tiles {
namespace {

constexpr int TILE_N = 16;

// Lanes of the 2 vectors that hold columns < n (all-ones lanes are the ones maskload reads).
inline void column_masks(int n, __m256i (&mask)[2]) {
  for (int j = 0; j < 2; j++) mask[j] = lanes_avx2::first(n - 8 * j);
}

// C[0..R) × [0..n) (+)= A(i, p)·B[p, ·] for p < k, n ≤ 16. kFull: n == 16, plain loads and stores.
// Without kLoadC each chain starts from 0 (C is overwritten); stream: whole aligned 64-byte lines
// of C go out with non-temporal stores.
template <int R, bool kLoadC, bool kFull>
inline void tile(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t ldb, int n, int k,
                 bool stream) {
  __m256i mask[2];
  column_masks(n, mask);
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int i = 0; i < R; i++)
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++)
      acc[i][j] = !kLoadC ? _mm256_setzero_ps()
                  : kFull ? _mm256_loadu_ps(C + i * ldc + 8 * j)
                          : _mm256_maskload_ps(C + i * ldc + 8 * j, mask[j]);
  for (int p = 0; p < k; p++) {
    const float* b = B + size_t(p) * ldb;
    const float* a = A + size_t(p) * csa;
    __m256 bv[2];
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) bv[j] = kFull ? _mm256_loadu_ps(b + 8 * j) : _mm256_maskload_ps(b + 8 * j, mask[j]);
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
      const __m256 av = _mm256_broadcast_ss(a + i * rsa);
#pragma GCC unroll 2
      for (int j = 0; j < 2; j++) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  const bool lines = kFull && stream && (reinterpret_cast<uintptr_t>(C) | ldc * sizeof(float)) % 64 == 0;
#pragma GCC unroll 8
  for (int i = 0; i < R; i++)
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) {
      float* c = C + i * ldc + 8 * j;
      if (lines) _mm256_stream_ps(c, acc[i][j]);
      else if (kFull) _mm256_storeu_ps(c, acc[i][j]);
      else _mm256_maskstore_ps(c, mask[j], acc[i][j]);
    }
}

template <bool kLoadC, bool kFull>
inline void tile_rows(int r, float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t ldb,
                      int n, int k, bool stream) {
  switch (r) {
    case 6: return tile<6, kLoadC, kFull>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
    case 5: return tile<5, kLoadC, kFull>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
    case 4: return tile<4, kLoadC, kFull>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
    case 3: return tile<3, kLoadC, kFull>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
    case 2: return tile<2, kLoadC, kFull>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
    default: return tile<1, kLoadC, kFull>(C, ldc, A, rsa, csa, B, ldb, n, k, stream);
  }
}

void pack_b(float* pk, const float* B, size_t ldb, int N, int k) {
  for (int q = 0; q * TILE_N < N; q++) {
    const int j = q * TILE_N, n = std::min(TILE_N, N - j);
    for (int p = 0; p < k; p++) {
      float* dst = pk + (size_t(q) * k + p) * TILE_N;
      const float* src = B + size_t(p) * ldb + j;
      std::copy(src, src + n, dst);
      std::fill(dst + n, dst + TILE_N, 0.0f);
    }
  }
}

// r[i][j] ↔ r[j][i] for 8 × 8 floats: pairs of rows interleaved (unpack), then pairs of pairs
// (shuffle), then the 128-bit halves swapped across (permute2f128).
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; i++)
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20), r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
}

// pack_b's panels from B given as its transpose, B(p, j) = Bt[j·ldbt + p]: 8 rows of Bt × 8 p
// loaded, transposed in registers into 8 p × 8 columns, each stored as half a panel row.
void pack_bt(float* pk, const float* Bt, size_t ldbt, int N, int k) {
  for (int j0 = 0; j0 < (N + TILE_N - 1) / TILE_N * TILE_N; j0 += 8)
    for (int p0 = 0; p0 < k; p0 += 8) {
      const int left = k - p0;
      const __m256i m = lanes_avx2::first(left);
      __m256 r[8];
      for (int t = 0; t < 8; t++)
        r[t] = j0 + t >= N ? _mm256_setzero_ps()
               : left >= 8 ? _mm256_loadu_ps(Bt + size_t(j0 + t) * ldbt + p0)
                           : _mm256_maskload_ps(Bt + size_t(j0 + t) * ldbt + p0, m);
      transpose8(r);  // r[u] = B(p0 + u, j0 .. j0+7)
      float* dst = pk + (size_t(j0 / TILE_N) * k + p0) * TILE_N + j0 % TILE_N;
      for (int u = 0; u < 8 && u < left; u++) _mm256_storeu_ps(dst + size_t(u) * TILE_N, r[u]);
    }
}

void block(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t ldb, const float* pk,
           int m, int N, int k, bool set, bool stream) {
  for_each_tile<TILE_N>(C, ldc, A, rsa, B, ldb, pk, m, N, k,
                        [&](int r, float* c, const float* a, const float* b, size_t lb, int n) {
                          if (n == TILE_N) {
                            if (set) tile_rows<false, true>(r, c, ldc, a, rsa, csa, b, lb, n, k, stream);
                            else tile_rows<true, true>(r, c, ldc, a, rsa, csa, b, lb, n, k, false);
                          } else if (set) {
                            tile_rows<false, false>(r, c, ldc, a, rsa, csa, b, lb, n, k, false);
                          } else {
                            tile_rows<true, false>(r, c, ldc, a, rsa, csa, b, lb, n, k, false);
                          }
                        });
}

}  // namespace

const TileSet kAvx2 = {TILE_N, pack_b, pack_bt, block};

}  // namespace orion::cpu::gemm_tiles
