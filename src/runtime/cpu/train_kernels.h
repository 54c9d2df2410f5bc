// CPU kernels for training: the gradients of y = x·Wᵀ (+ b), and the transposes they are built on.
//
// Forward (cpu::matmul):  y[M, N] = x[M, K] · W[N, K]ᵀ + b[N]
// Backward, given dy = ∂loss/∂y [M, N]:
//   dx[M, K] += dy · W         (each input channel collects from every output it fed)
//   dW[N, K] += dyᵀ · x        (outer products of output gradients and inputs, summed over M tokens)
//   db[N]    += Σ_m dy[m, :]
// All three accumulate (+=), as gradients of shared inputs and of accumulation steps do.
//
// With AVX-512 both products are gemm_acc (broadcast-FMA tiles on the operands as they lie);
// otherwise they reuse cpu::matmul (register-tiled, multithreaded) on transposed operands, the
// output dimension N in chunks of kTrainChunk columns to keep the scratch memory small (a
// 50257-token classifier would otherwise need its full transpose). Either way every element is
// summed in an order fixed by the sizes alone: the result is bit-identical for any number of threads.
#pragma once
#include <cstddef>

namespace orion::cpu {

constexpr int kTrainChunk = 1024;

// dst[cols, rows] = src[rows, cols]ᵀ (multithreaded, cache-blocked).
void transpose(float* dst, const float* src, int rows, int cols);

// y[M, N] = x[M, K]·W[N, K]ᵀ (+ b): with gemm_acc as yᵀ = W·xᵀ (W read once, xᵀ stays in L2),
// else cpu::matmul. Summed in an order fixed by the sizes (bit-identical for any thread count), but
// not the order of cpu::matmul: training's logits may differ from inference's in the last bits.
void matmul_forward_train(float* y, const float* x, const float* W, const float* bias, int M, int K, int N);
// dx[M, K] += dy[M, N] · W[N, K]
void matmul_backward_input(float* dx, const float* dy, const float* W, int M, int K, int N);
// dW[N, K] += dy[M, N]ᵀ · x[M, K]
void matmul_backward_weight(float* dW, const float* dy, const float* x, int M, int K, int N);
// db[N] += Σ_m dy[m, n]   (each column summed in row order)
void bias_backward(float* db, const float* dy, int M, int N);

// C[M, N] += A·B with A(i, p) = A[i·rsa + p·csa] (so Aᵀ needs no copy), B [K, N] row-major with
// row stride ldb, C row stride ldc; multithreaded, each C element one FMA chain over p in order
// (train_gemm.cpp). Only with AVX-512 (gemm_acc_available()); the two backward products use it
// when available, and transposes + cpu::matmul otherwise.
bool gemm_acc_available();
void gemm_acc(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t ldb, int M, int N,
              int K);

}  // namespace orion::cpu
