// e^x and tanh on whole vectors: glibc's vector math library (libmvec) when it is linked
// (ORION_HAVE_LIBMVEC, src/CMakeLists.txt), else the scalar function lane by lane.
//   AVX-512: _ZGVeN16v_expf, _ZGVeN8v_exp (within 1 ulp of expf, exp), _ZGVeN16v_tanhf (3 ulp of tanhf)
//   AVX2:    _ZGVdN8v_expf,  _ZGVdN4v_exp (within 1 ulp of expf, exp), _ZGVdN8v_tanhf  (3 ulp of tanhf)
// Only for files of orion_runtime that compile vector code for the ISA of the functions they call
// (train_simd.cpp, train_simd_avx2.cpp, train_attention_avx512.cpp, train_attention_avx2.cpp,
// kernels_avx512.cpp, kernels_avx2.cpp).
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstring>

#define ORION_VECMATH_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define ORION_VECMATH_AVX2 __attribute__((target("avx2,fma")))

#if ORION_HAVE_LIBMVEC
extern "C" ORION_VECMATH_AVX512 __m512 _ZGVeN16v_tanhf(__m512);
extern "C" ORION_VECMATH_AVX512 __m512 _ZGVeN16v_expf(__m512);
extern "C" ORION_VECMATH_AVX512 __m512d _ZGVeN8v_exp(__m512d);
extern "C" ORION_VECMATH_AVX2 __m256 _ZGVdN8v_tanhf(__m256);
extern "C" ORION_VECMATH_AVX2 __m256 _ZGVdN8v_expf(__m256);
extern "C" ORION_VECMATH_AVX2 __m256d _ZGVdN4v_exp(__m256d);
#endif

namespace orion::cpu::vecmath {

#if ORION_HAVE_LIBMVEC
ORION_VECMATH_AVX512 inline __m512 tanh16(__m512 u) { return _ZGVeN16v_tanhf(u); }
ORION_VECMATH_AVX512 inline __m512 exp16(__m512 u) { return _ZGVeN16v_expf(u); }
ORION_VECMATH_AVX512 inline __m512d exp8d(__m512d u) { return _ZGVeN8v_exp(u); }
ORION_VECMATH_AVX2 inline __m256 tanh8(__m256 u) { return _ZGVdN8v_tanhf(u); }
ORION_VECMATH_AVX2 inline __m256 exp8(__m256 u) { return _ZGVdN8v_expf(u); }
ORION_VECMATH_AVX2 inline __m256d exp4d(__m256d u) { return _ZGVdN4v_exp(u); }
#else
// The scalar function on each lane of *u, in place. (Through a pointer: a vector passed by value
// to a function without the vector's target attribute would change the calling convention.)
template <typename T, typename Vec, typename Fn>
inline Vec* each_lane(Vec* u, Fn fn) {
  T t[sizeof(Vec) / sizeof(T)];
  std::memcpy(t, u, sizeof *u);
  for (T& x : t) x = fn(x);
  std::memcpy(u, t, sizeof *u);
  return u;
}
inline float tanh1(float x) { return std::tanh(x); }
inline float exp1(float x) { return std::exp(x); }
inline double exp1d(double x) { return std::exp(x); }
ORION_VECMATH_AVX512 inline __m512 tanh16(__m512 u) { return *each_lane<float>(&u, tanh1); }
ORION_VECMATH_AVX512 inline __m512 exp16(__m512 u) { return *each_lane<float>(&u, exp1); }
ORION_VECMATH_AVX512 inline __m512d exp8d(__m512d u) { return *each_lane<double>(&u, exp1d); }
ORION_VECMATH_AVX2 inline __m256 tanh8(__m256 u) { return *each_lane<float>(&u, tanh1); }
ORION_VECMATH_AVX2 inline __m256 exp8(__m256 u) { return *each_lane<float>(&u, exp1); }
ORION_VECMATH_AVX2 inline __m256d exp4d(__m256d u) { return *each_lane<double>(&u, exp1d); }
#endif

}  // namespace orion::cpu::vecmath

#undef ORION_VECMATH_AVX512
#undef ORION_VECMATH_AVX2
