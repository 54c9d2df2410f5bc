// What the two halves of the training step's elementwise kernels share: train_simd.cpp (the
// AVX-512 kernels, and the *_simd entry points of train_kernels.h that pick a half by the active
// ISA) and train_simd_avx2.cpp (the AVX2 kernels, compiled with -mavx2 -mfma).
#pragma once
#include <cstddef>

#include "runtime/cpu/train_kernels.h"

namespace orion::cpu::train_simd {

// GELU's constants, rounded to float as train/cpu/layers.cpp rounds them.
constexpr float kGeluS = float(0.7978845608028654);  // √(2/π)
constexpr float kGeluA = float(0.044715);

// The AVX2 kernels: each the AVX-512 one of the same name in train_simd.cpp, 8 lanes at a time.
namespace avx2 {
void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const AdamWScalars& s);
double sum_squares(const float* g, size_t n);
void gelu_forward(float* out, float* th, const float* x, size_t n);
void gelu_backward(float* dinp, const float* dout, const float* x, const float* th, size_t n);
void swiglu_forward(float* out, const float* gate, const float* up, size_t n);
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, size_t n);
double exp_sum(const float* l, int V, float* row_max);
void softmax_scaled(float* d, const float* l, float lse, float scale, int V);
}  // namespace avx2

}  // namespace orion::cpu::train_simd
