// anesim's matrix product: the same bits on every CPU.
//
// The ANE accumulates a dot product in fp32 and rounds the result to fp16 once. anesim models that
// with an fp32 sum whose order is fixed by the math alone — each output summed in ascending k, one
// rounding per multiply and one per add (never a fused multiply-add) — so the result does not
// depend on the instruction set the host CPU runs (AVX-512, AVX2 or portable code: only how many
// outputs are computed side by side changes) nor on the number of threads. A sum whose order
// depended on the ISA would, after the fp16 rounding, flip the last bit of some outputs from one
// machine to the next, and training through anesim would drift differently on each.
#pragma once
#include <cstdint>
#include <vector>

namespace orion::runtime::anesim {

// C[m, n] = Σ_{k = 0 .. K−1} A(m, k) · B[k, n], summed in that order.
//   A(m, k) = a[m·a_row + k·a_k]   (any strides: a row-major [M, K] has a_row = K, a_k = 1;
//                                   a transposed [K, M] has a_row = 1, a_k = M)
//   B: [K, N] row-major (row stride ldb ≥ N)        C: [M, N] row-major
// Multithreaded (OpenMP) above a small size; vectorised across n with the active CPU ISA, or,
// for fewer columns than a tile is wide and A's rows contiguous (a_row = 1), across m. Columns of
// B equal bit for bit to an earlier one are computed once (column n of C depends on column n of B
// alone): a decode program's 32 columns hold one token and padding, so it costs two columns.
// The tile kernel gemm_fixed_order uses on this CPU ("avx512 (8×32 tiles)", …; `orion doctor`).
const char* gemm_fixed_order_path();
void gemm_fixed_order(float* c, const float* a, int64_t a_row, int64_t a_k, const float* b, int64_t ldb, int M, int K,
                      int N);

// A constant weight packed for streaming: fp16 bits (the ANE's precision) in blocks of kBlockRows
// rows, each block stored [K, kBlockRows] — A(m, k) at a[(m / 64)·64·K + k·64 + m % 64], the rows
// past M zero. A product with few columns (a decode token) then reads each block front to back,
// 2 bytes per weight, instead of striding across a [K, M] matrix page after page.
constexpr int kBlockRows = 64;
std::vector<uint16_t> pack_row_blocks(const uint16_t* a, int M, int K);  // a: row-major [M, K]
// gemm_fixed_order with A packed so, each element widened exactly to fp32 before its product: C
// has the bits of the fp32 call on the widened A.
void gemm_fixed_order_blocked(float* c, const uint16_t* a_blocks, const float* b, int64_t ldb, int M, int K, int N);

}  // namespace orion::runtime::anesim
