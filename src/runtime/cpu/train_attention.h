// The causal attention kernels of a training step, one copy per instruction set: the algorithm is
// written once (train_attention_kernels.inc) and compiled by train_attention_avx512.cpp (16-lane
// zmm vectors) and train_attention_avx2.cpp (8-lane ymm vectors). train_attention_simd.cpp holds
// the entry points of train_kernels.h, which own the scratch buffers and call the active ISA's copy.
#pragma once
#include <cstddef>

namespace orion::cpu::train_attention {

// One ISA's kernels for one (sequence, head): the arguments of attention_head_forward_simd /
// attention_head_backward_simd (train_kernels.h), plus scratch the caller owns: kt, vt [HS·T]
// (Kᵀ, Vᵀ), ds [T·T] (dP, then dS).
struct Kernels {
  void (*forward)(float* out, float* att, const float* q, const float* k, const float* v, size_t q_stride,
                  size_t kv_stride, int T, int HS, float scale, int window, float* kt);
  void (*backward)(float* dq, float* dk, float* dv, const float* dout, const float* att, const float* q, const float* k,
                   const float* v, size_t q_stride, size_t kv_stride, int T, int HS, float scale, float* vt, float* ds);
};

extern const Kernels kAvx512;  // train_attention_avx512.cpp
extern const Kernels kAvx2;    // train_attention_avx2.cpp

}  // namespace orion::cpu::train_attention
