// anesim's fixed-order matrix product (see anesim_gemm.h for why the order is fixed).
//
// Built with -ffp-contract=off (src/CMakeLists.txt): `acc + a * b` stays a rounded multiply and a
// rounded add on every target, never an FMA, which would round once and give other bits.
//
// The work is cut into tiles of MR rows × NR columns of C. A tile keeps its MR·NR sums in
// registers and walks k from 0 to K−1; at each k it loads NR consecutive values of B's row k and
// adds A(m, k)·B[k, n .. n+NR−1] to each of its rows. Every output element is therefore the same
// sequence of roundings whatever MR and NR are, so the AVX-512 (8 × 32), AVX2 (6 × 16) and
// portable (6 × 8) tiles give identical bits; they differ only in how many sums run side by side.
// An fp16 A (a constant weight) enters every product as its exact fp32 value, so the sums are the
// same again; only the bytes read from memory are halved.
#include "runtime/anesim/anesim_gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "runtime/anesim/anesim_columns.h"
#include "runtime/cpu/kernels.h"
#include "runtime/fp16_span.h"

namespace orion::runtime::anesim {
namespace {

// A is fp32, or fp16 bits (a constant weight kept in the ANE's precision: half the bytes to stream),
// read through the exact fp16 → fp32 conversion — the same values, so the same sums. Row m of A
// starts at row(m): m·a_row for a plain matrix (a_block = kBlockRows·a_row), or inside its block
// of kBlockRows rows for a weight packed by pack_row_blocks.
template <typename T>
struct Operands {
  const T* a;
  int64_t a_row, a_k, a_block;
  const float* b;
  int64_t ldb;
  float* c;
  int K, N;
  int64_t row(int m) const { return m / kBlockRows * a_block + m % kBlockRows * a_row; }
};

// Rows m0 .. m0+mr−1 and columns n0 .. n0+2L−1 of C (mr ≤ MR; the 2L columns all exist), with L
// the lanes of one native vector register. The MR·2 sums live in registers for the whole k loop
// (every loop below is unrolled, so none of them is spilled to the stack); at each k the tile
// loads two vectors of B's row k, broadcasts A(m, k) of each row and adds the product. MR is
// chosen so that the sums, B's two vectors and the broadcast fit the register file.
template <int L, int MR>
[[gnu::always_inline]] inline void tile(const Operands<float>& o, int m0, int mr, int n0) {
  typedef float vec __attribute__((vector_size(L * sizeof(float))));
  const float* arow[MR];
  vec lo[MR], hi[MR];  // columns n0 .. n0+L−1 and n0+L .. n0+2L−1
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    arow[i] = o.a + o.row(m0 + std::min(i, mr - 1));  // spare rows repeat the last
    lo[i] = vec{}, hi[i] = vec{};
  }
  const float* bk = o.b + n0;
  for (int64_t ak = 0, k = 0; k < o.K; k++, ak += o.a_k, bk += o.ldb) {
    vec b_lo, b_hi;
    std::memcpy(&b_lo, bk, sizeof b_lo);
    std::memcpy(&b_hi, bk + L, sizeof b_hi);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      const float a = arow[i][ak];
      lo[i] = lo[i] + a * b_lo;  // C(m, n) += A(m, k)·B(k, n)
      hi[i] = hi[i] + a * b_hi;
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++)
    if (i < mr) {
      float* crow = o.c + int64_t(m0 + i) * o.N + n0;
      std::memcpy(crow, &lo[i], sizeof(vec));
      std::memcpy(crow + L, &hi[i], sizeof(vec));
    }
}

inline float widen(float x) { return x; }
inline float widen(uint16_t h) { return f16_to_f32(h); }

// L consecutive elements of A as one vector: fp32 as they are, fp16 widened by vcvtph2ps (F16C,
// exact). Inline assembly because GCC refuses to inline a target-specific intrinsic into this
// ISA-neutral template; it runs only on the AVX2 and AVX-512 paths (L = 8, 16), which have F16C.
// (v is an out-parameter: returning a wide vector from an ISA-neutral function draws -Wpsabi.)
template <int L, typename vec>
[[gnu::always_inline]] inline void load_lanes(vec& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}
template <int L, typename vec>
[[gnu::always_inline]] inline void load_lanes(vec& v, const uint16_t* p) {
  if constexpr (L == 16) asm("vcvtph2ps %1, %0" : "=v"(v) : "m"(*reinterpret_cast<const uint16_t(*)[16]>(p)));
  else if constexpr (L == 8) asm("vcvtph2ps %1, %0" : "=x"(v) : "m"(*reinterpret_cast<const uint16_t(*)[8]>(p)));
  else
    for (int l = 0; l < L; l++) v[l] = f16_to_f32(p[l]);
}

// One element of C, summed the same way as a tile sums it.
template <typename T>
float element(const Operands<T>& o, int m, int n) {
  float s = 0.0f;
  const T* arow = o.a + o.row(m);
  for (int k = 0; k < o.K; k++) s = s + widen(arow[int64_t(k) * o.a_k]) * o.b[int64_t(k) * o.ldb + n];
  return s;
}

// The columns past the last whole tile, one element at a time in the same order.
template <typename T>
void tail_columns(const Operands<T>& o, int m0, int mr, int n0) {
  for (int i = 0; i < mr; i++)
    for (int n = n0; n < o.N; n++) o.c[int64_t(m0 + i) * o.N + n] = element(o, m0 + i, n);
}

// A narrow product (fewer columns than a tile is wide) with A's rows contiguous (a_row = 1, as for
// a weight stored transposed): the vectors run down C's rows instead of along them. A block holds
// MV·L rows × U columns of C; at each k it loads MV vectors of A(m0 .. , k), broadcasts B(k, n)
// and adds the products — each element still the sequence acc = acc + A(m, k)·B(k, n), k ascending.
template <int L, int MV, int U, typename T>
[[gnu::always_inline]] inline void column_block(const Operands<T>& o, int m0, int n0) {
  typedef float vec __attribute__((vector_size(L * sizeof(float))));
  vec acc[U][MV];
#pragma GCC unroll 16
  for (int j = 0; j < U; j++)
#pragma GCC unroll 16
    for (int v = 0; v < MV; v++) acc[j][v] = vec{};
  const T* ak = o.a + o.row(m0);  // the group's rows are contiguous, in one block
  const float* bk = o.b + n0;
  for (int k = 0; k < o.K; k++, ak += o.a_k, bk += o.ldb) {
    vec a[MV];
#pragma GCC unroll 16
    for (int v = 0; v < MV; v++) load_lanes<L>(a[v], ak + v * L);
#pragma GCC unroll 16
    for (int j = 0; j < U; j++) {
      const float b = bk[j];
#pragma GCC unroll 16
      for (int v = 0; v < MV; v++) acc[j][v] = acc[j][v] + a[v] * b;
    }
  }
  for (int j = 0; j < U; j++)
    for (int v = 0; v < MV; v++)
      for (int l = 0; l < L; l++) o.c[int64_t(m0 + v * L + l) * o.N + n0 + j] = acc[j][v][l];
}

// Columns n0 .. n0+u−1 (u ≤ 4) of rows m0 .. m0 + MV·L − 1.
template <int L, int MV, typename T>
[[gnu::always_inline]] inline void column_group(const Operands<T>& o, int m0, int n0, int u) {
  switch (u) {
    case 1: return column_block<L, MV, 1, T>(o, m0, n0);
    case 2: return column_block<L, MV, 2, T>(o, m0, n0);
    case 3: return column_block<L, MV, 3, T>(o, m0, n0);
    default: return column_block<L, MV, 4, T>(o, m0, n0);
  }
}

using TileFn = void (*)(const Operands<float>&, int, int, int);
void tile_generic(const Operands<float>& o, int m0, int mr, int n0) { tile<4, 6>(o, m0, mr, n0); }  // SSE: 16 registers
[[gnu::target("avx2")]] void tile_avx2(const Operands<float>& o, int m0, int mr, int n0) { tile<8, 6>(o, m0, mr, n0); }
[[gnu::target("avx512f")]] void tile_avx512(const Operands<float>& o, int m0, int mr, int n0) {
  tile<16, 8>(o, m0, mr, n0);
}

template <typename T>
using GroupFn = void (*)(const Operands<T>&, int, int, int);
template <typename T>
void group_generic(const Operands<T>& o, int m0, int n0, int u) { column_group<4, 2>(o, m0, n0, u); }
template <typename T>
[[gnu::target("avx2,f16c")]] void group_avx2(const Operands<T>& o, int m0, int n0, int u) {
  column_group<8, 2>(o, m0, n0, u);
}
template <typename T>
[[gnu::target("avx512f")]] void group_avx512(const Operands<T>& o, int m0, int n0, int u) {
  column_group<16, 4>(o, m0, n0, u);
}

// The kernels of the active instruction set: the tile, its width in columns and height in rows;
// the narrow product's column group (fp32 and fp16 A) and its height in rows.
struct TileChoice {
  TileFn fn;
  int NR, MR;
  GroupFn<float> group;
  GroupFn<uint16_t> group_f16;
  int group_rows;
  const char* path;
  GroupFn<float> group_of(const float*) const { return group; }
  GroupFn<uint16_t> group_of(const uint16_t*) const { return group_f16; }
};
TileChoice tile_choice() {
  switch (cpu::active_isa()) {
    case cpu::Isa::Avx512:
      return {tile_avx512, 32, 8, group_avx512<float>, group_avx512<uint16_t>, 64, "avx512 (8×32 tiles)"};
    case cpu::Isa::Avx2:
      return {tile_avx2, 16, 6, group_avx2<float>, group_avx2<uint16_t>, 16, "avx2 (6×16 tiles)"};
    case cpu::Isa::Generic: break;
  }
  return {tile_generic, 8, 6, group_generic<float>, group_generic<uint16_t>, 8, "generic (6×8 tiles)"};
}

constexpr int64_t kParallelAbove = 1 << 18;  // multiply-adds; smaller products run on one thread

// The narrow product: groups of up to 4 columns × group_rows rows, the rows past the last whole
// group one element at a time.
template <typename T>
void narrow_product(const TileChoice& choice, const Operands<T>& o, int M) {
  const GroupFn<T> group = choice.group_of(o.a);
  const int rows = choice.group_rows, m_groups = M / rows, n_groups = (o.N + 3) / 4;
  const int64_t groups = int64_t(m_groups) * n_groups;
#pragma omp parallel for schedule(static) if (int64_t(M) * o.N * o.K > kParallelAbove)
  for (int64_t g = 0; g < groups; g++) {
    const int n0 = int(g / m_groups) * 4, m0 = int(g % m_groups) * rows;
    group(o, m0, n0, std::min(4, o.N - n0));
  }
  for (int m = m_groups * rows; m < M; m++)
    for (int n = 0; n < o.N; n++) o.c[int64_t(m) * o.N + n] = element(o, m, n);
}

// One MR × NR tile of C, or the columns past the last whole tile.
void tile_or_tail(const TileChoice& choice, const Operands<float>& o, int m0, int mr, int n0) {
  if (n0 + choice.NR <= o.N) choice.fn(o, m0, mr, n0);
  else tail_columns(o, m0, mr, n0);
}

// The wide product: MR × NR tiles; consecutive tiles share a column panel of B (n outer, m inner),
// which then stays in cache.
void tiled_product(const TileChoice& choice, const Operands<float>& o, int M) {
  const int NR = choice.NR, MR = choice.MR;
  const int m_tiles = (M + MR - 1) / MR, n_tiles = (o.N + NR - 1) / NR;
  const int64_t tiles = int64_t(m_tiles) * n_tiles;
#pragma omp parallel for schedule(static) if (int64_t(M) * o.N * o.K > kParallelAbove)
  for (int64_t t = 0; t < tiles; t++) {
    const int nb = int(t / m_tiles), m0 = int(t % m_tiles) * MR;
    tile_or_tail(choice, o, m0, std::min(MR, M - m0), nb * NR);
  }
}

// The wide product of an fp16 A packed in row blocks: each step widens one block (contiguous, so
// one pass at memory speed; a tile then reads each element of it NR times from cache) and runs
// the block's tiles of one column panel of B. (An fp16 A is always one packed by pack_row_blocks.)
void tiled_product(const TileChoice& choice, const Operands<uint16_t>& o, int M) {
  const int NR = choice.NR, MR = choice.MR;
  const int blocks = (M + kBlockRows - 1) / kBlockRows, n_tiles = (o.N + NR - 1) / NR;
  const int64_t steps = int64_t(blocks) * n_tiles;
#pragma omp parallel if (int64_t(M) * o.N * o.K > kParallelAbove)
  {
    std::vector<float> wide(size_t(kBlockRows) * o.K);  // this thread's widened block, [K, 64]
#pragma omp for schedule(static)
    for (int64_t t = 0; t < steps; t++) {
      const int nb = int(t / blocks), block = int(t % blocks), rows = std::min(kBlockRows, M - block * kBlockRows);
      f16_to_f32_span(wide.data(), o.a + block * o.a_block, int64_t(kBlockRows) * o.K);
      float* c_rows = o.c + int64_t(block) * kBlockRows * o.N;
      const Operands<float> w{wide.data(), 1, kBlockRows, kBlockRows, o.b, o.ldb, c_rows, o.K, o.N};
      for (int m0 = 0; m0 < rows; m0 += MR) tile_or_tail(choice, w, m0, std::min(MR, rows - m0), nb * NR);
    }
  }
}

// C = A·B in fixed order (gemm_fixed_order), A fp32 or fp16.
template <typename T>
void product(float* c, const T* a, int64_t a_row, int64_t a_k, int64_t a_block, const float* b, int64_t ldb, int M,
             int K, int N) {
  const TileChoice choice = tile_choice();
  // Column n of C depends on column n of B alone, so columns of B with equal bits give equal
  // columns of C: each distinct column is computed once (a decode program's padding columns).
  const ColumnClasses classes(N > 1 ? first_equal_columns({{b, K, ldb, 4}}, N) : std::vector<int>{0});
  const int U = classes.width();
  if (U == N) {
    const Operands<T> o{a, a_row, a_k, a_block, b, ldb, c, K, N};
    if (a_row == 1 && N < choice.NR) narrow_product(choice, o, M);
    else tiled_product(choice, o, M);
    return;
  }
  std::vector<float> bu(size_t(K) * U), cu(size_t(M) * U);
  gather_columns(bu.data(), b, K, ldb, classes);
  product(cu.data(), a, a_row, a_k, a_block, bu.data(), U, M, K, U);
  scatter_columns(c, cu.data(), M, classes);  // column n of C = column slot[n] of cu
}

}  // namespace

const char* gemm_fixed_order_path() { return tile_choice().path; }

void gemm_fixed_order(float* c, const float* a, int64_t a_row, int64_t a_k, const float* b, int64_t ldb, int M, int K,
                      int N) {
  product(c, a, a_row, a_k, kBlockRows * a_row, b, ldb, M, K, N);
}

std::vector<uint16_t> pack_row_blocks(const uint16_t* a, int M, int K) {
  const int blocks = (M + kBlockRows - 1) / kBlockRows;
  std::vector<uint16_t> packed(size_t(blocks) * kBlockRows * K, 0);
  for (int m = 0; m < M; m++)
    for (int k = 0; k < K; k++)
      packed[(size_t(m / kBlockRows) * K + k) * kBlockRows + m % kBlockRows] = a[int64_t(m) * K + k];
  return packed;
}

void gemm_fixed_order_blocked(float* c, const uint16_t* a_blocks, const float* b, int64_t ldb, int M, int K, int N) {
  product(c, a_blocks, 1, kBlockRows, int64_t(kBlockRows) * K, b, ldb, M, K, N);
}

}  // namespace orion::runtime::anesim
