// The training step's elementwise kernels with AVX2 (+FMA), 8 floats to a vector: for CPUs without
// AVX-512. Each is the AVX-512 kernel of the same name in train_simd.cpp, with the same guarantees
// (listed at the top of that file): AdamW and the sum of squares bit-identical to the portable loops,
// GELU, SwiGLU and the cross-entropy rows within libmvec's ulps of them (the 8-lane variants
// _ZGVdN8v_tanhf, _ZGVdN8v_expf, _ZGVdN4v_exp: runtime/cpu/vector_math.h). What differs from the
// AVX-512 kernels in bits: only the cross-entropy row sum, which adds 8 double lanes here, 16 there.
#include <immintrin.h>

#include <cmath>
#include <cstddef>

#include "runtime/cpu/lanes_avx2.h"
#include "runtime/cpu/train_simd.h"
#include "runtime/cpu/vector_math.h"

// No multiply-add contraction (this file is compiled with -mfma): as in train_simd.cpp.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace orion::cpu::train_simd::avx2 {
namespace {

using vecmath::exp4d, vecmath::exp8, vecmath::tanh8;

// ---------------------------------------------------------------------------------------------
// Vectors of 8 over [0, n). A kernel is a body(i, lanes) run on each vector: whole vectors load
// and store plainly (lanes = All), the last partial one through a mask (lanes = Some, lanes past n
// read 0, or `fill`, and are not written). AVX2 has no mask registers, and its masked store is slow
// on some CPUs, so only the tail pays for it.
// ---------------------------------------------------------------------------------------------

using lanes_avx2::All, lanes_avx2::Some, lanes_avx2::load, lanes_avx2::store, lanes_avx2::max_of;

template <typename Body>
inline void for_vectors(size_t n, Body&& body) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) body(i, All{});
  if (i < n) body(i, lanes_avx2::first(int(n - i)));
}

// The 8 floats of x as two vectors of 4 doubles: lanes 0–3 and 4–7.
inline __m256d low4d(__m256 x) { return _mm256_cvtps_pd(_mm256_castps256_ps128(x)); }
inline __m256d high4d(__m256 x) { return _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)); }

// lo's lanes then hi's, added in order.
inline double sum_in_order(__m256d lo, __m256d hi) {
  alignas(32) double l[8];
  _mm256_store_pd(l, lo), _mm256_store_pd(l + 4, hi);
  double s = 0;
  for (double x : l) s += x;
  return s;
}

inline __m256 splat(float x) { return _mm256_set1_ps(x); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// AdamW: g' = g·gscale; m = β1·m + (1−β1)·g'; v = β2·v + (1−β2)·g'·g';
//        p −= lr·((m/c1)/(√(v/c2) + ε) + decay·p)   — each operation as the portable loop rounds it
// ---------------------------------------------------------------------------------------------

void adamw_update(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, size_t n,
                  const AdamWScalars& s) {
  const __m256 gs = splat(s.gscale), b1 = splat(s.beta1), ob1 = splat(1.0f - s.beta1), b2 = splat(s.beta2),
               ob2 = splat(1.0f - s.beta2), c1 = splat(s.c1), c2 = splat(s.c2), eps = splat(s.eps), lr = splat(s.lr),
               dec = splat(s.decay);
  for_vectors(n, [&](size_t i, auto k) {
    const __m256 gi = _mm256_mul_ps(load(g + i, k), gs);
    const __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, load(m + i, k)), _mm256_mul_ps(ob1, gi));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, load(v + i, k)), _mm256_mul_ps(_mm256_mul_ps(ob2, gi), gi));
    store(m + i, k, mi);
    store(v + i, k, vi);
    const __m256 mhat = _mm256_div_ps(mi, c1), vhat = _mm256_div_ps(vi, c2);
    const __m256 pi = load(p + i, k);
    const __m256 step = _mm256_add_ps(_mm256_div_ps(mhat, _mm256_add_ps(_mm256_sqrt_ps(vhat), eps)), _mm256_mul_ps(dec, pi));
    store(p + i, k, _mm256_sub_ps(pi, _mm256_mul_ps(lr, step)));
  });
}

// Σ g² in double (a float times a float is exact in double). The portable loop's 8 running sums —
// lane j takes i ≡ j mod 8 — are lanes 0–3 in lo and 4–7 in hi; then the 8 lanes and the tail in
// order, as it adds them.
double sum_squares(const float* g, size_t n) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256d a = low4d(x), b = high4d(x);
    lo = _mm256_add_pd(lo, _mm256_mul_pd(a, a));
    hi = _mm256_add_pd(hi, _mm256_mul_pd(b, b));
  }
  double s = sum_in_order(lo, hi);
  for (; i < n; i++) s += double(g[i]) * g[i];
  return s;
}

// ---------------------------------------------------------------------------------------------
// GELU (tanh form): th = tanh(s·(x + a·x³)), out = ½x·(1 + th), s = √(2/π), a = 0.044715
// ---------------------------------------------------------------------------------------------

void gelu_forward(float* out, float* th, const float* x, size_t n) {
  const __m256 s = splat(kGeluS), a = splat(kGeluA), half = splat(0.5f), one = splat(1.0f);
  for_vectors(n, [&](size_t i, auto k) {
    const __m256 xi = load(x + i, k);
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(a, xi), xi), xi);  // left to right: (a·x)·x·x
    const __m256 t = tanh8(_mm256_mul_ps(s, _mm256_add_ps(xi, x3)));
    if (th) store(th + i, k, t);
    store(out + i, k, _mm256_mul_ps(_mm256_mul_ps(half, xi), _mm256_add_ps(one, t)));
  });
}

// d out/dx = ½(1 + th) + ½x·(1 − th²)·s·(1 + 3a·x²): tanh' = 1 − tanh², u' = s(1 + 3a·x²)
void gelu_backward(float* dinp, const float* dout, const float* x, const float* th, size_t n) {
  const __m256 s = splat(kGeluS), a3 = splat(3.0f * kGeluA), half = splat(0.5f), one = splat(1.0f);
  for_vectors(n, [&](size_t i, auto k) {
    const __m256 xi = load(x + i, k), t = load(th + i, k);
    const __m256 left = _mm256_mul_ps(half, _mm256_add_ps(one, t));
    const __m256 sech2 = _mm256_sub_ps(one, _mm256_mul_ps(t, t));
    const __m256 poly = _mm256_add_ps(one, _mm256_mul_ps(_mm256_mul_ps(a3, xi), xi));
    const __m256 right = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(half, xi), sech2), s), poly);
    const __m256 d = _mm256_mul_ps(load(dout + i, k), _mm256_add_ps(left, right));
    store(dinp + i, k, _mm256_add_ps(load(dinp + i, k), d));
  });
}

// ---------------------------------------------------------------------------------------------
// SwiGLU: σ = 1/(1 + e^(−g)), out = g·σ·up;  silu'(g) = σ·(1 + g·(1 − σ))
// ---------------------------------------------------------------------------------------------

void swiglu_forward(float* out, const float* gate, const float* up, size_t n) {
  const __m256 one = splat(1.0f), zero = _mm256_setzero_ps();
  for_vectors(n, [&](size_t i, auto k) {
    const __m256 g = load(gate + i, k);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, g))));
    store(out + i, k, _mm256_mul_ps(silu, load(up + i, k)));
  });
}

// dgate += dout·up·silu'(g),  dup += dout·g·σ
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, size_t n) {
  const __m256 one = splat(1.0f), zero = _mm256_setzero_ps();
  for_vectors(n, [&](size_t i, auto k) {
    const __m256 g = load(gate + i, k), u = load(up + i, k), d = load(dout + i, k);
    const __m256 sig = _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, g))));
    const __m256 dg =
        _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(d, u), sig), _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, sig))));
    store(dgate + i, k, _mm256_add_ps(load(dgate + i, k), dg));
    store(dup + i, k, _mm256_add_ps(load(dup + i, k), _mm256_mul_ps(_mm256_mul_ps(d, g), sig)));
  });
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy rows: Σ_i e^(l_i − max) in double, and the gradient scale·e^(l_i − lse)
// ---------------------------------------------------------------------------------------------

double exp_sum(const float* l, int V, float* row_max) {
  const size_t n = size_t(V);
  __m256 mv = splat(-INFINITY);
  for_vectors(n, [&](size_t i, auto k) { mv = _mm256_max_ps(mv, load(l + i, k, -INFINITY)); });
  const float mx = max_of(mv);
  const __m256 m = splat(mx);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  for_vectors(n, [&](size_t i, auto k) {
    // lanes past V read −inf: e^(−inf) = 0 adds nothing
    const __m256 d = _mm256_sub_ps(load(l + i, k, -INFINITY), m);
    lo = _mm256_add_pd(lo, exp4d(low4d(d)));
    hi = _mm256_add_pd(hi, exp4d(high4d(d)));
  });
  *row_max = mx;
  return sum_in_order(lo, hi);
}

void softmax_scaled(float* d, const float* l, float lse, float scale, int V) {
  const __m256 m = splat(lse), sc = splat(scale);
  for_vectors(size_t(V), [&](size_t i, auto k) { store(d + i, k, _mm256_mul_ps(sc, exp8(_mm256_sub_ps(load(l + i, k), m)))); });
}

}  // namespace orion::cpu::train_simd::avx2
