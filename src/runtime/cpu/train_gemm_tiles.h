// The register tiles behind gemm_acc (train_gemm.cpp), one set per instruction set. The driver —
// K slices of KC, column blocks of NC, row tiles of TM shared out over the threads, when to pack B
// — is train_gemm.cpp's and the same for every set; a set only says how TM rows × tile_n columns of
// C are computed and how a block of B is packed into panels of tile_n columns.
//
// Every set computes each C[i, j] as the same chain of FMAs, c ← c + A(i, p)·B[p, j] for p in
// order (from C, or from 0 when the product overwrites C), so all sets give the same bits.
#pragma once
#include <algorithm>
#include <cstddef>

namespace orion::cpu::gemm_tiles {

constexpr int TM = 6;                // rows of C per register tile (every set)
constexpr int KC = 256, NC = 512;    // a K slice, a column block: B's block (512 KB) stays in L2

struct TileSet {
  int tile_n;  // columns of C per register tile; B is packed into panels this wide
  // B[0..k) × [0..N) (N ≤ NC) as column panels: panel q holds B[p, q·tile_n ..] at
  // pk[(q·k + p)·tile_n ..], zero past N.
  void (*pack_b)(float* pk, const float* B, size_t ldb, int N, int k);
  // The same panels from B given as its transpose, B(p, j) = Bt[j·ldbt + p].
  void (*pack_bt)(float* pk, const float* Bt, size_t ldbt, int N, int k);
  // Rows [0, m) × columns [0, N) of C, one K slice of length k; B row-major (pk == nullptr) or
  // packed. set: C = this slice's products; stream: and they are C's last write (non-temporal).
  void (*block)(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t ldb,
                const float* pk, int m, int N, int k, bool set, bool stream);
};

// A block's register tiles in order — row tiles of TM, column tiles of TILE_N innermost, so A's
// TM × k values stay in L1 while B's block (in L2) passes — each as
//   tile(r rows, C at the tile, A at its rows, B at its columns (row-major or its packed panel),
//        B's row stride, n columns).
template <int TILE_N, class Tile>
void for_each_tile(float* C, size_t ldc, const float* A, size_t rsa, const float* B, size_t ldb, const float* pk, int m,
                   int N, int k, Tile&& tile) {
  for (int i = 0; i < m; i += TM)
    for (int j = 0; j < N; j += TILE_N) {
      const float* b = pk ? pk + size_t(j / TILE_N) * k * TILE_N : B + j;
      tile(std::min(TM, m - i), C + size_t(i) * ldc + j, A + size_t(i) * rsa, b, pk ? size_t(TILE_N) : ldb,
           std::min(TILE_N, N - j));
    }
}

extern const TileSet kAvx512;  // 6 × 64 in 24 zmm accumulators (train_gemm.cpp)
extern const TileSet kAvx2;    // 6 × 16 in 12 ymm accumulators (train_gemm_avx2.cpp)

}  // namespace orion::cpu::gemm_tiles
