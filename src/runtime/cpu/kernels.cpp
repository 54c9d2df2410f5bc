// Portable implementations of kernels.h (placeholder until the dispatched AVX versions land).
#include "runtime/cpu/kernels.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace orion::cpu {

void set_num_threads(int n) { omp_set_num_threads(n > 0 ? n : omp_get_num_procs()); }
int num_threads() { return omp_get_max_threads(); }
Isa active_isa() { return Isa::Generic; }
const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Generic: return "generic";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}
bool set_isa(Isa isa) { return isa == Isa::Generic; }

void matmul(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    std::vector<float> w(static_cast<size_t>(K));
    const uint8_t* row = static_cast<const uint8_t*>(W) + size_t(n) * K * dtype_size(wt);
    convert_dtype(row, wt, w.data(), DType::F32, size_t(K));
    for (int m = 0; m < M; m++) {
      const float* xm = x + size_t(m) * K;
      float s = 0;
      for (int k = 0; k < K; k++) s += xm[k] * w[k];
      y[size_t(m) * N + n] = s + (bias ? bias[n] : 0.0f);
    }
  }
}

void rmsnorm(float* y, const float* x, const float* w, int M, int C, float eps) {
  for (int m = 0; m < M; m++) {
    const float* xm = x + size_t(m) * C;
    float ss = 0;
    for (int i = 0; i < C; i++) ss += xm[i] * xm[i];
    float r = 1.0f / std::sqrt(ss / C + eps);
    for (int i = 0; i < C; i++) y[size_t(m) * C + i] = xm[i] * r * w[i];
  }
}

void layernorm(float* y, const float* x, const float* w, const float* b, int M, int C, float eps) {
  for (int m = 0; m < M; m++) {
    const float* xm = x + size_t(m) * C;
    float mean = 0, var = 0;
    for (int i = 0; i < C; i++) mean += xm[i];
    mean /= C;
    for (int i = 0; i < C; i++) var += (xm[i] - mean) * (xm[i] - mean);
    float r = 1.0f / std::sqrt(var / C + eps);
    for (int i = 0; i < C; i++) y[size_t(m) * C + i] = (xm[i] - mean) * r * w[i] + b[i];
  }
}

void add_inplace(float* y, const float* x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void gelu_tanh_inplace(float* x, size_t n) {
  const float s = 0.7978845608028654f;
  for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + std::tanh(s * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}

void swiglu(float* h, const float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; i++) h[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void softmax_inplace(float* x, int n) {
  float mx = x[0];
  for (int i = 1; i < n; i++) mx = std::max(mx, x[i]);
  float s = 0;
  for (int i = 0; i < n; i++) s += (x[i] = std::exp(x[i] - mx));
  for (int i = 0; i < n; i++) x[i] /= s;
}

void embedding_row(float* out, const void* table, DType dt, int64_t id, int C) {
  convert_dtype(static_cast<const uint8_t*>(table) + size_t(id) * C * dtype_size(dt), dt, out, DType::F32, size_t(C));
}

void rope(float* x, int n_heads, int head_dim, int pos, float theta) {
  for (int h = 0; h < n_heads; h++)
    for (int i = 0; i < head_dim; i += 2) {
      float freq = 1.0f / std::pow(theta, float(i) / head_dim);
      float a = pos * freq, c = std::cos(a), s = std::sin(a);
      float* p = x + h * head_dim + i;
      float x0 = p[0], x1 = p[1];
      p[0] = x0 * c - x1 * s;
      p[1] = x0 * s + x1 * c;
    }
}

void attention(float* out, const float* q, const float* k, const float* v, int T, int pos0, int n_heads,
               int n_kv_heads, int head_dim, int kv_stride) {
  const int group = n_heads / n_kv_heads, Q = n_heads * head_dim;
  const float scale = 1.0f / std::sqrt(float(head_dim));
#pragma omp parallel for collapse(2) schedule(static)
  for (int t = 0; t < T; t++)
    for (int h = 0; h < n_heads; h++) {
      int len = pos0 + t + 1;
      std::vector<float> att(static_cast<size_t>(len));
      const float* qh = q + size_t(t) * Q + h * head_dim;
      int kvh = h / group;
      for (int p = 0; p < len; p++) {
        const float* kp = k + size_t(p) * kv_stride + kvh * head_dim;
        float s = 0;
        for (int i = 0; i < head_dim; i++) s += qh[i] * kp[i];
        att[size_t(p)] = s * scale;
      }
      softmax_inplace(att.data(), len);
      float* oh = out + size_t(t) * Q + h * head_dim;
      std::memset(oh, 0, sizeof(float) * head_dim);
      for (int p = 0; p < len; p++) {
        const float* vp = v + size_t(p) * kv_stride + kvh * head_dim;
        for (int i = 0; i < head_dim; i++) oh[i] += att[size_t(p)] * vp[i];
      }
    }
}

double stream_triad_bandwidth(size_t bytes, int reps) {
  size_t n = bytes / sizeof(float);
  float* a = static_cast<float*>(std::aligned_alloc(64, n * 4));
  float* b = static_cast<float*>(std::aligned_alloc(64, n * 4));
  float* c = static_cast<float*>(std::aligned_alloc(64, n * 4));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2;
  double best = 0;
  for (int r = 0; r < reps; r++) {
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 3.0 * n * 4 / s);
  }
  std::free(a), std::free(b), std::free(c);
  return best;
}

}  // namespace orion::cpu
