// The training step's causal attention with AVX2 + FMA (8 floats to a ymm vector), for CPUs
// without AVX-512: the kernels of train_attention_kernels.inc over the vector type below, a tile of
// 6 rows × 2 vectors (16 columns: 12 accumulators + 2 vectors of B + 1 broadcast of the 16 ymm
// registers). Compiled with -mavx2 -mfma (src/CMakeLists.txt) and only called when AVX2 is the
// active ISA (train_attention_simd.cpp).
//
// AVX2 has no mask registers: whole vectors load and store plainly, and only the partial last
// vector of a row goes through vmaskmovps (lane j on when the sign bit of its int is set), which
// reads and writes nothing past the lanes that are on.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <utility>

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_attention.h"
#include "runtime/cpu/vector_math.h"

namespace orion::cpu::train_attention {
namespace {

#include "runtime/cpu/train_attention_kernels.inc"

struct Avx2 {
  using Reg = __m256;
  using Mask = __m256i;  // lane j is on when its sign bit is set
  static constexpr int kLanes = 8, kVecs = 2;

  static Mask first(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
  static Reg load(const float* p, All) { return _mm256_loadu_ps(p); }
  static Reg load(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static Reg load(const float* p, All, float) { return _mm256_loadu_ps(p); }
  static Reg load(const float* p, Mask m, float fill) {
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store(float* p, All, Reg x) { _mm256_storeu_ps(p, x); }
  static void store(float* p, Mask m, Reg x) { _mm256_maskstore_ps(p, m, x); }
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
  // The 8 lanes: the two halves added (or maxed), then pairs, then the last two.
  static float reduce_add(Reg x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static float reduce_max(Reg x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
  }
};

}  // namespace

namespace avx2 {

void head_forward(float* out, float* att, const float* q, const float* k, const float* v, size_t q_stride, size_t kv_stride,
                  int T, int HS, float scale, int window, float* kt) {
  train_attention::head_forward<Avx2>(out, att, q, k, v, q_stride, kv_stride, T, HS, scale, window, kt);
}

void head_backward(float* dq, float* dk, float* dv, const float* dout, const float* att, const float* q, const float* k,
                   const float* v, size_t q_stride, size_t kv_stride, int T, int HS, float scale, float* vt, float* ds) {
  train_attention::head_backward<Avx2>(dq, dk, dv, dout, att, q, k, v, q_stride, kv_stride, T, HS, scale, vt, ds);
}

}  // namespace avx2
}  // namespace orion::cpu::train_attention
