// q8_0 kernels in portable C++ (the reference the SIMD versions are tested against), and the
// activation quantisation that every instruction set uses.
#include <cmath>
#include <vector>

#include "runtime/cpu/kernels_q8.h"

namespace orion::cpu {

void q8_quantize_generic(const float* x, int8_t* q, float* d, size_t blocks) {
  for (size_t b = 0; b < blocks; b++) {
    const float* v = x + b * kQ8Block;
    float amax = 0;
    for (int i = 0; i < kQ8Block; i++) amax = std::max(amax, std::fabs(v[i]));
    const float s = amax / 127.0f, inv = s != 0 ? 1.0f / s : 0.0f;
    d[b] = s;
    for (int i = 0; i < kQ8Block; i++) q[b * kQ8Block + i] = int8_t(std::nearbyint(v[i] * inv));
  }
}

Q8Activations quantize_activations(const float* x, int M, int K) {
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d;
  const size_t blocks = size_t(M) * size_t(K / kQ8Block);
  q.resize(size_t(M) * K);
  d.resize(blocks);
  isa_kernels().q8_quantize(x, q.data(), d.data(), blocks);
  return {q.data(), d.data()};
}

namespace {

struct GenericQ8 {
  static constexpr int kRows = 4;
  template <int R, bool PF>
  static void block(float* y, const int8_t* xq, const float* xd, const uint8_t* w, size_t row_bytes, int blocks,
                    const float* bias) {
    for (int r = 0; r < R; r++) {
      const BlockQ8_0* wb = reinterpret_cast<const BlockQ8_0*>(w + r * row_bytes);
      float s = 0;
      for (int b = 0; b < blocks; b++) {
        int32_t dot = 0;
        for (int i = 0; i < kQ8Block; i++) dot += int32_t(wb[b].q[i]) * int32_t(xq[b * kQ8Block + i]);
        s += float(dot) * (f16_to_f32(wb[b].d) * xd[b]);
      }
      y[r] = bias ? s + bias[r] : s;
    }
  }
};

}  // namespace

void q8_matvec_generic(float* y, const float* x, const void* W, const float* bias, int K, int n0, int n1) {
  q8_matvec_from_f32(q8_matvec_quantized_generic, y, x, W, bias, K, n0, n1);
}
void q8_matvec_quantized_generic(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K,
                                 int n0, int n1) {
  q8_matvec_quantized<GenericQ8>(y, xq, xd, W, bias, K, n0, n1);
}
void q8_gemm_generic(float* y, const Q8Activations& a, const void* W, const float* bias, int M, int K, int N, int n0,
                     int n1) {
  q8_gemm_rows<GenericQ8>(y, a, W, bias, M, K, N, n0, n1);
}

}  // namespace orion::cpu
