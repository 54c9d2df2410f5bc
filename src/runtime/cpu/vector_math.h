// e^x and tanh on whole AVX-512 vectors: glibc's vector math library (libmvec: _ZGVeN16v_expf
// within 1 ulp of expf, _ZGVeN8v_exp within 1 ulp of exp, _ZGVeN16v_tanhf within 3 ulp of tanhf)
// when it is linked (ORION_HAVE_LIBMVEC, src/CMakeLists.txt), else the scalar function lane by lane.
// Only for files of orion_runtime that compile AVX-512 code (train_simd.cpp, train_attention_simd.cpp).
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstring>

#define ORION_VECMATH __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

#if ORION_HAVE_LIBMVEC
extern "C" ORION_VECMATH __m512 _ZGVeN16v_tanhf(__m512);
extern "C" ORION_VECMATH __m512 _ZGVeN16v_expf(__m512);
extern "C" ORION_VECMATH __m512d _ZGVeN8v_exp(__m512d);
#endif

namespace orion::cpu::vecmath {

#if ORION_HAVE_LIBMVEC
ORION_VECMATH inline __m512 tanh16(__m512 u) { return _ZGVeN16v_tanhf(u); }
ORION_VECMATH inline __m512 exp16(__m512 u) { return _ZGVeN16v_expf(u); }
ORION_VECMATH inline __m512d exp8d(__m512d u) { return _ZGVeN8v_exp(u); }
#else
// The scalar function lane by lane.
template <typename T, typename Vec, typename Fn>
ORION_VECMATH inline Vec each_lane(Vec u, Fn fn) {
  T t[sizeof(Vec) / sizeof(T)];
  std::memcpy(t, &u, sizeof u);
  for (T& x : t) x = fn(x);
  std::memcpy(&u, t, sizeof u);
  return u;
}
ORION_VECMATH inline __m512 tanh16(__m512 u) {
  return each_lane<float>(u, [](float x) { return std::tanh(x); });
}
ORION_VECMATH inline __m512 exp16(__m512 u) {
  return each_lane<float>(u, [](float x) { return std::exp(x); });
}
ORION_VECMATH inline __m512d exp8d(__m512d u) {
  return each_lane<double>(u, [](double x) { return std::exp(x); });
}
#endif

}  // namespace orion::cpu::vecmath

#undef ORION_VECMATH
