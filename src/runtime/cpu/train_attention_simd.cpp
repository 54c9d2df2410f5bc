// Causal attention of one (sequence, head) in a training step, with vector kernels: the entry points
// of train_kernels.h. They own the scratch buffers and run the kernels of the active ISA, both
// compiled from the one algorithm in train_attention_kernels.inc (the products, the tiles, the
// causal triangles: read it there):
//   AVX-512: train_attention_avx512.cpp, register tiles of 6 rows × 4 zmm vectors (64 columns);
//   AVX2:    train_attention_avx2.cpp,   register tiles of 6 rows × 2 ymm vectors (16 columns).
// Callers use them when attention_simd_available() and the portable loops of train/cpu/layers.cpp
// otherwise.
//
// What the bits are:
//   - against the portable loops: the same products summed in another order, and e^x from
//     libmvec (_ZGVeN16v_expf / _ZGVdN8v_expf, within 1 ulp of expf): equal to float rounding.
//   - AVX2 against AVX-512: every element of every product (S, O, dP, dQ, dK, dV) is the same FMA
//     chain in the same order of k, so the same inputs give the same bits. The softmax rows differ
//     in the last bits: their max is exact, but the sums Σ e and Σ P·dP run in 8 lanes here and 16
//     there, and e^x is another libmvec variant; P, then O, dQ, dK (through dS), differ by float
//     rounding. dV = Pᵀ·dO, given the same P, is the same bits.
// Sums run in an order fixed by T and HS (one thread per head; the callers split heads over
// threads), so the results do not depend on the number of threads.
#include <cstddef>
#include <vector>

#include "base/line_aligned.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_attention.h"
#include "runtime/cpu/train_kernels.h"

namespace orion::cpu {
namespace {

// Scratch buffer i of this thread, at least n floats (kept between calls).
float* scratch(int i, size_t n) {
  thread_local LineAlignedVector<float> buf[2];
  if (buf[i].size() < n) buf[i].resize(n);
  return buf[i].data();
}

}  // namespace

bool attention_simd_available(int HS) { return train_simd_available() && HS > 0; }  // AVX-512 or AVX2

// The active ISA's kernels (call only when attention_simd_available()).
static const train_attention::Kernels& active_kernels() {
  return active_isa() == Isa::Avx512 ? train_attention::kAvx512 : train_attention::kAvx2;
}

void attention_head_forward_simd(float* out, float* att, const float* q, const float* k, const float* v, size_t q_stride,
                                 size_t kv_stride, int T, int HS, float scale, int window) {
  float* kt = scratch(0, size_t(HS) * T);  // Kᵀ [HS, T]
  active_kernels().forward(out, att, q, k, v, q_stride, kv_stride, T, HS, scale, window, kt);
}

void attention_head_backward_simd(float* dq, float* dk, float* dv, const float* dout, const float* att, const float* q,
                                  const float* k, const float* v, size_t q_stride, size_t kv_stride, int T, int HS,
                                  float scale) {
  float* vt = scratch(0, size_t(HS) * T);  // Vᵀ [HS, T]
  float* ds = scratch(1, size_t(T) * T);   // dP, then dS [T, T]
  active_kernels().backward(dq, dk, dv, dout, att, q, k, v, q_stride, kv_stride, T, HS, scale, vt, ds);
}

}  // namespace orion::cpu
