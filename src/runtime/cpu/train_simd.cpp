// The elementwise kernels of a training step, vectorised: AdamW's update, the gradient's sum of
// squares, GELU, SwiGLU and the cross-entropy rows (GELU and SwiGLU serve inference too:
// cpu::gelu_tanh_inplace, cpu::swiglu). This file holds the AVX-512 kernels (function
// target attribute) and the *_simd entry points, which run them when the active ISA is AVX-512 and
// the AVX2 ones (train_simd_avx2.cpp, 8 lanes where these have 16) when it is AVX2; callers use
// the entry points when train_simd_available() and their portable loops otherwise (attention:
// train_attention_simd.cpp). Single-threaded: the callers split the work.
//
// What stays bit-for-bit as the portable code computes it, and what does not (both ISAs):
//   - adamw_update and sum_squares: the same IEEE operations in the same order (no FMA
//     contraction, see the pragma below), so every path gives the same bits.
//   - swiglu: the same operations, e^(−g) from libmvec (within 1 ulp of expf).
//   - gelu_forward_simd: tanh from glibc's vector math library (libmvec, _ZGVeN16v_tanhf or
//     _ZGVdN8v_tanhf) when it is linked: within 3 ulp of the scalar tanhf (differs in ~3% of
//     floats). The rest of the formula is the same operations in the same order. The tanh is kept
//     for the backward, which then needs no tanh of its own.
//   - cross-entropy rows: the max exactly; e^x from libmvec (exp in double within 1 ulp of exp,
//     expf for the gradient within 1 ulp of expf), the double sum in 16 lanes (AVX2: 8), reordered.
// Every output element is computed by one thread in an order fixed by the sizes, so results do
// not depend on the number of threads.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_simd.h"
#include "runtime/cpu/vector_math.h"

#define ORION_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593 in the AVX-512 headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// No multiply-add contraction: C++ compiles with -ffp-contract=fast by default, which lets GCC fuse
// _mm512_mul_ps + _mm512_add_ps into one FMA (one rounding instead of two) and break the
// bit-identity with the portable loops promised above. FMAs are written out where wanted.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace orion::cpu {
namespace {

// Lanes [0, n) of a 16-float vector, n ≤ 16.
ORION_AVX512 inline __mmask16 first(size_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

using train_simd::kGeluA, train_simd::kGeluS, vecmath::exp16, vecmath::exp8d, vecmath::tanh16;

// ---------------------------------------------------------------------------------------------
// AdamW
// ---------------------------------------------------------------------------------------------

ORION_AVX512 void adamw_avx512(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                               size_t n, const AdamWScalars& s) {
  const __m512 gs = _mm512_set1_ps(s.gscale), b1 = _mm512_set1_ps(s.beta1), ob1 = _mm512_set1_ps(1.0f - s.beta1),
               b2 = _mm512_set1_ps(s.beta2), ob2 = _mm512_set1_ps(1.0f - s.beta2), c1 = _mm512_set1_ps(s.c1),
               c2 = _mm512_set1_ps(s.c2), eps = _mm512_set1_ps(s.eps), lr = _mm512_set1_ps(s.lr),
               dec = _mm512_set1_ps(s.decay);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 k = first(n - i);
    const __m512 gi = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, g + i), gs);
    const __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_maskz_loadu_ps(k, m + i)), _mm512_mul_ps(ob1, gi));
    const __m512 vi =
        _mm512_add_ps(_mm512_mul_ps(b2, _mm512_maskz_loadu_ps(k, v + i)), _mm512_mul_ps(_mm512_mul_ps(ob2, gi), gi));
    _mm512_mask_storeu_ps(m + i, k, mi);
    _mm512_mask_storeu_ps(v + i, k, vi);
    const __m512 mhat = _mm512_div_ps(mi, c1), vhat = _mm512_div_ps(vi, c2);
    const __m512 pi = _mm512_maskz_loadu_ps(k, p + i);
    const __m512 step = _mm512_add_ps(_mm512_div_ps(mhat, _mm512_add_ps(_mm512_sqrt_ps(vhat), eps)), _mm512_mul_ps(dec, pi));
    _mm512_mask_storeu_ps(p + i, k, _mm512_sub_ps(pi, _mm512_mul_ps(lr, step)));
  }
}

// 8 double lanes (lane j takes i ≡ j mod 8), then the lanes and the tail in order.
ORION_AVX512 double sum_squares_avx512(const float* g, size_t n) {
  __m512d lane = _mm512_setzero_pd();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d x = _mm512_cvtps_pd(_mm256_loadu_ps(g + i));
    lane = _mm512_add_pd(lane, _mm512_mul_pd(x, x));
  }
  alignas(64) double l[8];
  _mm512_store_pd(l, lane);
  double s = 0;
  for (double x : l) s += x;
  for (; i < n; i++) s += double(g[i]) * g[i];
  return s;
}

// ---------------------------------------------------------------------------------------------
// GELU
// ---------------------------------------------------------------------------------------------

ORION_AVX512 void gelu_forward_avx512(float* out, float* th, const float* x, size_t n) {
  const __m512 s = _mm512_set1_ps(kGeluS), a = _mm512_set1_ps(kGeluA), half = _mm512_set1_ps(0.5f),
               one = _mm512_set1_ps(1.0f);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 k = first(n - i);
    const __m512 xi = _mm512_maskz_loadu_ps(k, x + i);
    // s·(x + a·x·x·x), left to right as the scalar expression
    const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(a, xi), xi), xi);
    const __m512 t = tanh16(_mm512_mul_ps(s, _mm512_add_ps(xi, x3)));
    if (th) _mm512_mask_storeu_ps(th + i, k, t);
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_mul_ps(half, xi), _mm512_add_ps(one, t)));
  }
}

ORION_AVX512 void gelu_backward_avx512(float* dinp, const float* dout, const float* x, const float* th, size_t n) {
  const __m512 s = _mm512_set1_ps(kGeluS), a3 = _mm512_set1_ps(3.0f * kGeluA), half = _mm512_set1_ps(0.5f),
               one = _mm512_set1_ps(1.0f);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 k = first(n - i);
    const __m512 xi = _mm512_maskz_loadu_ps(k, x + i), t = _mm512_maskz_loadu_ps(k, th + i);
    // ½(1 + th) + ½x·(1 − th²)·s·(1 + 3a·x·x)
    const __m512 left = _mm512_mul_ps(half, _mm512_add_ps(one, t));
    const __m512 sech2 = _mm512_sub_ps(one, _mm512_mul_ps(t, t));
    const __m512 poly = _mm512_add_ps(one, _mm512_mul_ps(_mm512_mul_ps(a3, xi), xi));
    const __m512 right = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(half, xi), sech2), s), poly);
    const __m512 d = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dout + i), _mm512_add_ps(left, right));
    _mm512_mask_storeu_ps(dinp + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, dinp + i), d));
  }
}

// ---------------------------------------------------------------------------------------------
// SwiGLU: the portable loop's operations, e^(−g) from libmvec
// ---------------------------------------------------------------------------------------------

ORION_AVX512 void swiglu_forward_avx512(float* out, const float* gate, const float* up, size_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 k = first(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(k, gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(zero, g))));
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(k, up + i)));
  }
}

ORION_AVX512 void swiglu_backward_avx512(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                         size_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 k = first(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(k, gate + i), u = _mm512_maskz_loadu_ps(k, up + i),
                 d = _mm512_maskz_loadu_ps(k, dout + i);
    const __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(zero, g))));
    // dgate += dout·up·σ·(1 + g(1 − σ)),  dup += dout·g·σ
    const __m512 dg = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(d, u), sig),
                                    _mm512_add_ps(one, _mm512_mul_ps(g, _mm512_sub_ps(one, sig))));
    _mm512_mask_storeu_ps(dgate + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, dgate + i), dg));
    _mm512_mask_storeu_ps(dup + i, k,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(k, dup + i), _mm512_mul_ps(_mm512_mul_ps(d, g), sig)));
  }
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy rows
// ---------------------------------------------------------------------------------------------

ORION_AVX512 double exp_sum_avx512(const float* l, int V, float* row_max) {
  __m512 mv = _mm512_set1_ps(-INFINITY);
  for (int i = 0; i < V; i += 16) mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(mv, first(size_t(V - i)), l + i));
  const float mx = _mm512_reduce_max_ps(mv);
  const __m512 m = _mm512_set1_ps(mx);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int i = 0; i < V; i += 16) {
    // lanes past V read −inf: e^(−inf) = 0 adds nothing
    const __m512 d = _mm512_sub_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), first(size_t(V - i)), l + i), m);
    lo = _mm512_add_pd(lo, exp8d(_mm512_cvtps_pd(_mm512_castps512_ps256(d))));
    hi = _mm512_add_pd(hi, exp8d(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d), 1)))));
  }
  alignas(64) double a[8], b[8];
  _mm512_store_pd(a, lo), _mm512_store_pd(b, hi);
  double s = 0;
  for (int j = 0; j < 8; j++) s += a[j];
  for (int j = 0; j < 8; j++) s += b[j];
  *row_max = mx;
  return s;
}

ORION_AVX512 void softmax_scaled_avx512(float* d, const float* l, float lse, float scale, int V) {
  const __m512 m = _mm512_set1_ps(lse), sc = _mm512_set1_ps(scale);
  for (int i = 0; i < V; i += 16) {
    const __mmask16 k = first(size_t(V - i));
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, l + i), m));
    _mm512_mask_storeu_ps(d + i, k, _mm512_mul_ps(sc, e));
  }
}

// ---------------------------------------------------------------------------------------------
// The entry points: the AVX-512 kernel or the AVX2 one (train_simd_avx2.cpp), by the active ISA
// ---------------------------------------------------------------------------------------------

namespace avx2 = train_simd::avx2;

template <typename R, typename... Args>
R on_active_isa(R (*avx512)(Args...), R (*avx2)(Args...), std::type_identity_t<Args>... args) {
  return active_isa() == Isa::Avx512 ? avx512(args...) : avx2(args...);
}

}  // namespace

bool train_simd_available() { return active_isa() == Isa::Avx512 || active_isa() == Isa::Avx2; }

void adamw_update_simd(float* p, const float* g, float* m, float* v, size_t n, const AdamWScalars& s) {
  on_active_isa(adamw_avx512, avx2::adamw_update, p, g, m, v, n, s);
}
double sum_squares_simd(const float* g, size_t n) { return on_active_isa(sum_squares_avx512, avx2::sum_squares, g, n); }
void gelu_forward_simd(float* out, float* th, const float* x, size_t n) {
  on_active_isa(gelu_forward_avx512, avx2::gelu_forward, out, th, x, n);
}
void gelu_backward_simd(float* dinp, const float* dout, const float* x, const float* th, size_t n) {
  on_active_isa(gelu_backward_avx512, avx2::gelu_backward, dinp, dout, x, th, n);
}

void swiglu_forward_simd(float* out, const float* gate, const float* up, size_t n) {
  on_active_isa(swiglu_forward_avx512, avx2::swiglu_forward, out, gate, up, n);
}
void swiglu_backward_simd(float* dgate, float* dup, const float* dout, const float* gate, const float* up, size_t n) {
  on_active_isa(swiglu_backward_avx512, avx2::swiglu_backward, dgate, dup, dout, gate, up, n);
}

double exp_sum_simd(const float* l, int V, float* row_max) { return on_active_isa(exp_sum_avx512, avx2::exp_sum, l, V, row_max); }
void softmax_scaled_simd(float* d, const float* l, float lse, float scale, int V) {
  on_active_isa(softmax_scaled_avx512, avx2::softmax_scaled, d, l, lse, scale, V);
}

}  // namespace orion::cpu
