// Gradients of the linear layer as matrix products on transposed operands (see train_kernels.h).
#include "runtime/cpu/train_kernels.h"

#include <algorithm>
#include <vector>

#include "base/line_aligned.h"
#include "runtime/cpu/bf16_weight_packs.h"
#include "runtime/cpu/kernels.h"

namespace orion::cpu {
namespace {

// Scratch reused across calls (the training step calls these from one thread).
LineAlignedVector<float>& scratch(int i, size_t n) {
  thread_local LineAlignedVector<float> buf[4];
  if (buf[i].size() < n) buf[i].resize(n);
  return buf[i];
}

// y += x, split over threads in fixed ranges (elementwise: any split gives the same bits).
void add_parallel(float* __restrict y, const float* __restrict x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > (1u << 15))
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

// dst[r, :] = src[r, c0 .. c1)   rows of a column range, packed
void copy_columns(float* dst, const float* src, int rows, int cols, int c0, int c1) {
#pragma omp parallel for schedule(static) if (size_t(rows) * (c1 - c0) > (1u << 15))
  for (int r = 0; r < rows; r++)
    std::copy(src + size_t(r) * cols + c0, src + size_t(r) * cols + c1, dst + size_t(r) * (c1 - c0));
}

}  // namespace

void transpose(float* dst, const float* src, int rows, int cols) {
  constexpr int TB = 32;  // 32×32 tiles: both the reads and the writes stay within a few cache lines
  const int tr = (rows + TB - 1) / TB, tc = (cols + TB - 1) / TB;
#pragma omp parallel for schedule(static) if (size_t(rows) * cols > (1u << 15))
  for (int t = 0; t < tr * tc; t++) {
    const int r0 = t / tc * TB, c0 = t % tc * TB;
    const int r1 = std::min(rows, r0 + TB), c1 = std::min(cols, c0 + TB);
    for (int c = c0; c < c1; c++)
      for (int r = r0; r < r1; r++) dst[size_t(c) * rows + r] = src[size_t(r) * cols + c];
  }
}

// y = x·Wᵀ + b straight into y, W read in place: each block of Wᵀ is packed into the tiles' panels
// through transposes in registers (gemm_acc_bt) — no transposed copy of W, x or y. Each y[m, n] is
// one chain of FMAs, bias then x[m, k]·W[n, k] for k = 0, 1, …, whatever the number of rows.
void matmul_forward_train(float* y, const float* x, const float* W, const float* bias, int M, int K, int N) {
  if (train_gemm_precision() != GemmPrecision::F32) {
    // y[M, N] = bias in every row + x·Wᵀ, straight into y: B(k, n) = W[n, k] packs into the bf16
    // panels through a transpose in registers (train_gemm_lowp.cpp).
    // y is overwritten from the bias; logits (tens of MB) bypass the caches, activations do not.
    const COut out = size_t(M) * N * sizeof(float) > (size_t(16) << 20) ? COut::OverwriteCold : COut::Overwrite;
    note_weight(W, N, K);
    if (const uint32_t* kept = kept_weight_pack(W, N, K, KeptLayout::Rows))
      return gemm_acc_bf16_kept(y, size_t(N), x, size_t(K), 1, kept, M, N, K, out, bias);
    return gemm_acc_lowp(train_gemm_precision(), LowpPath::Auto, y, size_t(N), x, size_t(K), 1, W, 1, size_t(K), M, N, K,
                         out, bias);
  }
  if (!gemm_acc_available() || M < 16) return matmul(y, x, W, DType::F32, bias, M, K, N);
  fill_rows(y, size_t(N), M, N, bias);
  gemm_acc_bt(y, size_t(N), x, size_t(K), 1, W, size_t(K), M, N, K);
}

// dx[M, K] += Σ over chunks [n0, n1) of dy[:, n0:n1] · W[n0:n1, :]
// Each chunk is cpu::matmul(x = dy chunk [M, n], W' = W chunkᵀ [K, n]).
void matmul_backward_input(float* dx, const float* dy, const float* W, int M, int K, int N) {
  if (train_gemm_precision() != GemmPrecision::F32) {
    note_weight(W, N, K);
    if (const uint32_t* kept = kept_weight_pack(W, N, K, KeptLayout::Cols))
      return gemm_acc_bf16_kept(dx, size_t(K), dy, size_t(N), 1, kept, M, K, N);
    return gemm_acc_lowp(train_gemm_precision(), LowpPath::Auto, dx, size_t(K), dy, size_t(N), 1, W, size_t(K), 1, M, K, N);
  }
  if (gemm_acc_available()) return gemm_acc(dx, size_t(K), dy, size_t(N), 1, W, size_t(K), M, K, N);
  const int ch = std::min(N, kTrainChunk);
  float* dyc = scratch(0, size_t(M) * ch).data();  // [M, ch]
  float* wt = scratch(1, size_t(K) * ch).data();   // [K, ch]
  float* tmp = scratch(2, size_t(M) * K).data();   // [M, K]
  for (int n0 = 0; n0 < N; n0 += ch) {
    const int n1 = std::min(N, n0 + ch), n = n1 - n0;
    const float* dyp = dy;
    if (n != N) copy_columns(dyc, dy, M, N, n0, n1), dyp = dyc;
    transpose(wt, W + size_t(n0) * K, n, K);  // rows n0..n1 of W, [n, K] → [K, n]
    matmul(tmp, dyp, wt, DType::F32, nullptr, M, n, K);
    add_parallel(dx, tmp, size_t(M) * K);
  }
}

void fill_rows(float* C, size_t ldc, int M, int N, const float* bias) {
#pragma omp parallel for schedule(static) if (size_t(M) * N > (1u << 15))
  for (int r = 0; r < M; r++) {
    float* row = C + size_t(r) * ldc;
    if (bias) std::copy(bias, bias + N, row);
    else std::fill_n(row, N, 0.0f);
  }
}

// dW[n0:n1, :] += dy[:, n0:n1]ᵀ · x, i.e. cpu::matmul(x = dy chunkᵀ [n, M], W' = xᵀ [K, M]).
void matmul_backward_weight(float* dW, const float* dy, const float* x, int M, int K, int N, COut out) {
  if (train_gemm_precision() != GemmPrecision::F32)  // A(n, m) = dy[m, n]
    return gemm_acc_lowp(train_gemm_precision(), LowpPath::Auto, dW, size_t(K), dy, 1, size_t(N), x, size_t(K), 1, N, K, M,
                         out);
  // A(n, m) = dy[m, n]: row stride 1, column stride N.
  if (gemm_acc_available()) return gemm_acc(dW, size_t(K), dy, 1, size_t(N), x, size_t(K), N, K, M, out);
  if (out != COut::Accumulate) fill_rows(dW, size_t(K), N, K, nullptr);
  const int ch = std::min(N, kTrainChunk);
  float* xt = scratch(0, size_t(K) * M).data();    // [K, M]
  float* dyt = scratch(1, size_t(ch) * M).data();  // [ch, M]
  float* tmp = scratch(2, size_t(ch) * K).data();  // [ch, K]
  float* dyc = scratch(3, size_t(M) * ch).data();  // [M, ch]
  transpose(xt, x, M, K);
  for (int n0 = 0; n0 < N; n0 += ch) {
    const int n1 = std::min(N, n0 + ch), n = n1 - n0;
    const float* dyp = dy;
    if (n != N) copy_columns(dyc, dy, M, N, n0, n1), dyp = dyc;
    transpose(dyt, dyp, M, n);
    matmul(tmp, dyt, xt, DType::F32, nullptr, n, M, K);
    add_parallel(dW + size_t(n0) * K, tmp, size_t(n) * K);
  }
}

void bias_backward(float* db, const float* dy, int M, int N) {
  constexpr int CB = 64;  // a block of columns per task; each column summed over m in order
#pragma omp parallel for schedule(static) if (size_t(M) * N > (1u << 15))
  for (int c0 = 0; c0 < N; c0 += CB) {
    const int c1 = std::min(N, c0 + CB);
    for (int m = 0; m < M; m++) {
      const float* row = dy + size_t(m) * N;
#pragma omp simd
      for (int c = c0; c < c1; c++) db[c] += row[c];
    }
  }
}

}  // namespace orion::cpu
