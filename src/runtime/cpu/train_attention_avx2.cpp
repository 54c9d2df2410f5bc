// The training step's causal attention with AVX2 + FMA (8 floats to a ymm vector), for CPUs
// without AVX-512: the kernels of train_attention_kernels.inc over the vector type below, a tile of
// 6 rows × 2 vectors (16 columns: 12 accumulators + 2 vectors of B + 1 broadcast of the 16 ymm
// registers). Compiled with -mavx2 -mfma (src/CMakeLists.txt) and only called when AVX2 is the
// active ISA (train_attention_simd.cpp).
// The partial last vector of a row goes through vmaskmovps (lanes_avx2.h).
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <utility>

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/lanes_avx2.h"
#include "runtime/cpu/train_attention.h"
#include "runtime/cpu/vector_math.h"

namespace orion::cpu::train_attention {
namespace {

#include "runtime/cpu/train_attention_kernels.inc"

struct Avx2 {
  using Reg = __m256;
  using Mask = __m256i;  // lane j is on when its sign bit is set
  static constexpr int kLanes = 8, kVecs = 2;

  static Mask first(int n) { return lanes_avx2::first(n); }
  static Reg load(const float* p, All) { return _mm256_loadu_ps(p); }
  static Reg load(const float* p, Mask m) { return lanes_avx2::load(p, m); }
  static Reg load(const float* p, All, float) { return _mm256_loadu_ps(p); }
  static Reg load(const float* p, Mask m, float fill) { return lanes_avx2::load(p, m, fill); }
  static void store(float* p, All, Reg x) { _mm256_storeu_ps(p, x); }
  static void store(float* p, Mask m, Reg x) { lanes_avx2::store(p, m, x); }
  static Reg keep(All, Reg x) { return x; }
  static Reg keep(Mask m, Reg x) { return _mm256_and_ps(x, _mm256_castsi256_ps(m)); }

  static Reg set1(float a) { return _mm256_set1_ps(a); }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg exp(Reg x) { return vecmath::exp8(x); }
  static float reduce_add(Reg x) { return lanes_avx2::sum_of(x); }
  static float reduce_max(Reg x) { return lanes_avx2::max_of(x); }
};

}  // namespace

const Kernels kAvx2 = {head_forward<Avx2>, head_backward<Avx2>};

}  // namespace orion::cpu::train_attention
