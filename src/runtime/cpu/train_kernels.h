// CPU kernels for training: the gradients of y = x·Wᵀ (+ b), and the transposes they are built on.
//
// Forward (cpu::matmul):  y[M, N] = x[M, K] · W[N, K]ᵀ + b[N]
// Backward, given dy = ∂loss/∂y [M, N]:
//   dx[M, K] += dy · W         (each input channel collects from every output it fed)
//   dW[N, K] += dyᵀ · x        (outer products of output gradients and inputs, summed over M tokens)
//   db[N]    += Σ_m dy[m, :]
// All three accumulate (+=), as gradients of shared inputs and of accumulation steps do.
//
// Both products reuse cpu::matmul (register-tiled, multithreaded) on transposed operands, so every
// element is summed in an order fixed by the sizes alone: the result is bit-identical for any
// number of threads. The output dimension N is processed in chunks of kTrainChunk columns to keep
// the scratch memory small (a 50257-token classifier would otherwise need its full transpose).
#pragma once
#include <cstddef>

namespace orion::cpu {

constexpr int kTrainChunk = 1024;

// dst[cols, rows] = src[rows, cols]ᵀ (multithreaded, cache-blocked).
void transpose(float* dst, const float* src, int rows, int cols);

// dx[M, K] += dy[M, N] · W[N, K]
void matmul_backward_input(float* dx, const float* dy, const float* W, int M, int K, int N);
// dW[N, K] += dy[M, N]ᵀ · x[M, K]
void matmul_backward_weight(float* dW, const float* dy, const float* x, int M, int K, int N);
// db[N] += Σ_m dy[m, n]   (each column summed in row order)
void bias_backward(float* db, const float* dy, int M, int N);

}  // namespace orion::cpu
