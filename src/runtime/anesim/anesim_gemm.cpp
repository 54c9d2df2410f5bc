// anesim's fixed-order matrix product (see anesim_gemm.h for why the order is fixed).
//
// Built with -ffp-contract=off (src/CMakeLists.txt): `acc + a * b` stays a rounded multiply and a
// rounded add on every target, never an FMA, which would round once and give other bits.
//
// The work is cut into tiles of MR rows × NR columns of C. A tile keeps its MR·NR sums in
// registers and walks k from 0 to K−1; at each k it loads NR consecutive values of B's row k and
// adds A(m, k)·B[k, n .. n+NR−1] to each of its rows. Every output element is therefore the same
// sequence of roundings whatever NR is, so the AVX-512 (NR = 32), AVX2 (16) and portable (8)
// tiles give identical bits; they differ only in how many sums run side by side.
#include "runtime/anesim/anesim_gemm.h"

#include <algorithm>
#include <cstring>

#include "runtime/cpu/kernels.h"

namespace orion::runtime::anesim {
namespace {

constexpr int MR = 6;  // rows of C per tile: 6 rows × 2 vector registers of accumulators

struct Operands {
  const float* a;
  int64_t a_row, a_k;
  const float* b;
  int64_t ldb;
  float* c;
  int K, N;
};

// Rows m0 .. m0+mr−1 and columns n0 .. n0+NR−1 of C (mr ≤ MR; NR columns all exist).
template <int NR>
[[gnu::always_inline]] inline void tile(const Operands& o, int m0, int mr, int n0) {
  typedef float vec __attribute__((vector_size(NR * sizeof(float))));
  const float* arow[MR];
  for (int i = 0; i < MR; i++) arow[i] = o.a + int64_t(m0 + std::min(i, mr - 1)) * o.a_row;  // spare rows repeat the last
  vec acc[MR] = {};
  for (int k = 0; k < o.K; k++) {
    vec bk;
    std::memcpy(&bk, o.b + int64_t(k) * o.ldb + n0, sizeof bk);
    for (int i = 0; i < MR; i++) acc[i] = acc[i] + arow[i][int64_t(k) * o.a_k] * bk;  // C(m, n) += A(m, k)·B(k, n)
  }
  for (int i = 0; i < mr; i++) std::memcpy(o.c + int64_t(m0 + i) * o.N + n0, &acc[i], sizeof(vec));
}

// The columns past the last whole tile, one element at a time in the same order.
void tail_columns(const Operands& o, int m0, int mr, int n0) {
  for (int i = 0; i < mr; i++)
    for (int n = n0; n < o.N; n++) {
      float s = 0.0f;
      const float* arow = o.a + int64_t(m0 + i) * o.a_row;
      for (int k = 0; k < o.K; k++) s = s + arow[int64_t(k) * o.a_k] * o.b[int64_t(k) * o.ldb + n];
      o.c[int64_t(m0 + i) * o.N + n] = s;
    }
}

using TileFn = void (*)(const Operands&, int, int, int);
template <int NR>
void tile_generic(const Operands& o, int m0, int mr, int n0) {
  tile<NR>(o, m0, mr, n0);
}
[[gnu::target("avx2")]] void tile_avx2(const Operands& o, int m0, int mr, int n0) { tile<16>(o, m0, mr, n0); }
[[gnu::target("avx512f")]] void tile_avx512(const Operands& o, int m0, int mr, int n0) { tile<32>(o, m0, mr, n0); }

// The tile kernel of the active instruction set and its width in columns.
struct TileChoice {
  TileFn fn;
  int NR;
  const char* path;
};
TileChoice tile_choice() {
  switch (cpu::active_isa()) {
    case cpu::Isa::Avx512: return {tile_avx512, 32, "avx512 (32-column tiles)"};
    case cpu::Isa::Avx2: return {tile_avx2, 16, "avx2 (16-column tiles)"};
    case cpu::Isa::Generic: break;
  }
  return {tile_generic<8>, 8, "generic (8-column tiles)"};
}

}  // namespace

const char* gemm_fixed_order_path() { return tile_choice().path; }

void gemm_fixed_order(float* c, const float* a, int64_t a_row, int64_t a_k, const float* b, int64_t ldb, int M, int K,
                      int N) {
  const TileChoice choice = tile_choice();
  const TileFn fn = choice.fn;
  const int NR = choice.NR;
  const Operands o{a, a_row, a_k, b, ldb, c, K, N};
  const int m_tiles = (M + MR - 1) / MR, n_whole = N / NR, n_tiles = n_whole + (N % NR ? 1 : 0);
  const int64_t tiles = int64_t(m_tiles) * n_tiles;
  // Consecutive tiles share a column panel of B (n outer, m inner), which then stays in cache.
#pragma omp parallel for schedule(static) if (int64_t(M) * N * K > (1 << 18))
  for (int64_t t = 0; t < tiles; t++) {
    const int nb = int(t / m_tiles), m0 = int(t % m_tiles) * MR, mr = std::min(MR, M - m0);
    if (nb < n_whole) fn(o, m0, mr, nb * NR);
    else tail_columns(o, m0, mr, n_whole * NR);
  }
}

}  // namespace orion::runtime::anesim
