// The training step's causal attention with AVX-512 (16 floats to a zmm vector): the kernels of
// train_attention_kernels.inc over the vector type below, a tile of 6 rows × 4 vectors (64 columns,
// 24 accumulators of the 32 zmm registers). Compiled with -mavx512f… (src/CMakeLists.txt) and only
// called when AVX-512 is the active ISA (train_attention_simd.cpp).
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <utility>

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_attention.h"
#include "runtime/cpu/vector_math.h"

#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593 in the AVX-512 headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace orion::cpu::train_attention {
namespace {

#include "runtime/cpu/train_attention_kernels.inc"

struct Avx512 {
  using Reg = __m512;
  using Mask = __mmask16;  // lane j is on when bit j is set
  static constexpr int kLanes = 16, kVecs = 4;

  static Mask first(int n) { return n >= 16 ? Mask(0xffff) : n > 0 ? Mask((1u << n) - 1) : Mask(0); }
  static Reg load(const float* p, All) { return _mm512_loadu_ps(p); }
  static Reg load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static Reg load(const float* p, All, float) { return _mm512_loadu_ps(p); }
  static Reg load(const float* p, Mask m, float fill) { return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), m, p); }
  static void store(float* p, All, Reg x) { _mm512_storeu_ps(p, x); }
  static void store(float* p, Mask m, Reg x) { _mm512_mask_storeu_ps(p, m, x); }
  static Reg keep(All, Reg x) { return x; }
  static Reg keep(Mask m, Reg x) { return _mm512_maskz_mov_ps(m, x); }

  static Reg set1(float a) { return _mm512_set1_ps(a); }
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg exp(Reg x) { return vecmath::exp16(x); }
  static float reduce_add(Reg x) { return _mm512_reduce_add_ps(x); }
  static float reduce_max(Reg x) { return _mm512_reduce_max_ps(x); }
};

}  // namespace

const Kernels kAvx512 = {head_forward<Avx512>, head_backward<Avx512>};

}  // namespace orion::cpu::train_attention
