// Portable C++ kernels: the generic entry of the ISA table, and the kernels every ISA shares
// (normalisation, elementwise, embeddings, RoPE), which are a small part of the time per token.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/cpu/kernels_q8.h"
#include "runtime/cpu/train_kernels.h"

namespace orion::cpu {
namespace {

// Weight element k of a row of dtype T as fp32 (T = float, or uint16_t bits of f16 / bf16).
template <DType D>
inline float load_w(const void* row, int k) {
  if constexpr (D == DType::F32) return static_cast<const float*>(row)[k];
  if constexpr (D == DType::F16) return f16_to_f32(static_cast<const uint16_t*>(row)[k]);
  if constexpr (D == DType::BF16) return bf16_to_f32(static_cast<const uint16_t*>(row)[k]);
  return 0;
}

// y[n] = Σ_k x[k]·W[n, k] for rows n0 .. n1−1. Each row keeps 8 partial sums (lane j sums the
// k ≡ j mod 8), folded pairwise at the end, so the order is the same for every row and every call.
template <DType D>
void matvec_rows_t(float* y, const float* x, const void* W, const float* bias, int K, int n0, int n1) {
  const size_t row_bytes = size_t(K) * dtype_size(D);
  for (int n = n0; n < n1; n++) {
    const void* w = static_cast<const uint8_t*>(W) + size_t(n) * row_bytes;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int k = 0;
    for (; k + 8 <= K; k += 8)
      for (int j = 0; j < 8; j++) acc[j] += x[k + j] * load_w<D>(w, k + j);
    for (int j = 0; k + j < K; j++) acc[j] += x[k + j] * load_w<D>(w, k + j);
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    y[n] = bias ? s + bias[n] : s;
  }
}

void matvec_rows(float* y, const float* x, const void* W, DType wt, const float* bias, int K, int n0, int n1) {
  switch (wt) {
    case DType::F32: return matvec_rows_t<DType::F32>(y, x, W, bias, K, n0, n1);
    case DType::F16: return matvec_rows_t<DType::F16>(y, x, W, bias, K, n0, n1);
    case DType::BF16: return matvec_rows_t<DType::BF16>(y, x, W, bias, K, n0, n1);
    case DType::Q8_0: return q8_matvec_generic(y, x, W, bias, K, n0, n1);
  }
}

// Prefill columns n0 .. n1−1: one matvec per token (the portable path keeps it simple).
void gemm_rows(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N, int n0, int n1,
               float*) {
  if (wt == DType::Q8_0) return q8_gemm_generic(y, quantize_activations(x, M, K), W, bias, M, K, N, n0, n1);
  for (int m = 0; m < M; m++) matvec_rows(y + size_t(m) * N, x + size_t(m) * K, W, wt, bias, K, n0, n1);
}

void to_f32(float* dst, const void* src, DType dt, size_t n) {
  switch (dt) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::F16:
      for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::BF16:
      for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::Q8_0: dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n); return;
  }
}

float dot(const float* a, const float* b, int n) {
  float s = 0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

void axpy(float* y, float s, const float* x, int n) {
  for (int i = 0; i < n; i++) y[i] += s * x[i];
}

// An f32 or f16 cache element as fp32 (exact either way).
inline float widen(float x) { return x; }
inline float widen(uint16_t h) { return f16_to_f32(h); }

// att[p] = dot(q, k_p)·scale, summed as dot() sums.
template <typename T>
void scores_of(float* att, const float* q, const T* k, int len, int head_dim, int kv_stride, float scale) {
  for (int p = 0; p < len; p++) {
    const T* kp = k + size_t(p) * kv_stride;
    float s = 0;
    for (int i = 0; i < head_dim; i++) s += q[i] * widen(kp[i]);
    att[p] = s * scale;
  }
}

// out = Σ_p att[p]·v_p, as axpy(out, att[p], v_p) from out = 0.
template <typename T>
void weighted_sum_of(float* out, const float* att, const T* v, int len, int head_dim, int kv_stride) {
  std::fill(out, out + head_dim, 0.0f);
  for (int p = 0; p < len; p++) {
    const T* vp = v + size_t(p) * kv_stride;
    for (int i = 0; i < head_dim; i++) out[i] += att[p] * widen(vp[i]);
  }
}

void softmax(float* x, int n) {
  float mx = x[0];  // subtracting the max keeps every exp ≤ 1 (no overflow)
  for (int i = 1; i < n; i++) mx = std::max(mx, x[i]);
  float s = 0;
  for (int i = 0; i < n; i++) s += (x[i] = std::exp(x[i] - mx));
  const float inv = 1.0f / s;
  for (int i = 0; i < n; i++) x[i] *= inv;
}

// IsaKernels::read_fold: 8 words per step in two XOR trees (8 loads in flight, a short chain).
uint64_t read_fold(const void* p, size_t words) {
  const char* b = static_cast<const char*>(p);
  auto word = [&](size_t i) {
    uint64_t w;
    std::memcpy(&w, b + 8 * i, 8);
    return w;
  };
  uint64_t f = 0;
  size_t i = 0;
  for (; i + 8 <= words; i += 8)
    f ^= ((word(i) ^ word(i + 1)) ^ (word(i + 2) ^ word(i + 3))) ^ ((word(i + 4) ^ word(i + 5)) ^ (word(i + 6) ^ word(i + 7)));
  return f ^ xor_words(b + 8 * i, words - i);
}

}  // namespace

const IsaKernels kGenericKernels = {Isa::Generic,
                                    matvec_rows,
                                    q8_matvec_quantized_generic,
                                    gemm_rows,
                                    4,
                                    q8_gemm_generic,
                                    to_f32,
                                    dot,
                                    axpy,
                                    scores_of<float>,
                                    weighted_sum_of<float>,
                                    scores_of<uint16_t>,
                                    weighted_sum_of<uint16_t>,
                                    q8_quantize_generic,
                                    softmax,
                                    read_fold};

// fn(i) for i in [0, n): split over the threads when `parallel`, else a plain loop on the calling
// thread — without opening an OpenMP region at all, since even a region an if clause keeps to one
// thread costs ~3 µs to open (2.8 µs measured on the Zen 5 VM), and a decode step calls these
// kernels hundreds of times per token from inside its own region (family/decode_step.cpp).
template <typename Fn>
void for_each_index(size_t n, bool parallel, Fn fn) {
  if (!parallel) {
    for (size_t i = 0; i < n; i++) fn(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) fn(i);
}

// --- normalisation (one row per token; rows are independent, so threads split them) -------------

void rmsnorm(float* y, const float* x, const float* w, int M, int C, float eps) {
  for_each_index(size_t(M), M > 1, [&](size_t m) {
    const float* xm = x + m * C;
    float* ym = y + m * C;
    float ss = 0;
    for (int i = 0; i < C; i++) ss += xm[i] * xm[i];
    const float r = 1.0f / std::sqrt(ss / C + eps);  // 1 / rms(x)
    for (int i = 0; i < C; i++) ym[i] = xm[i] * r * w[i];
  });
}

void layernorm(float* y, const float* x, const float* w, const float* b, int M, int C, float eps) {
  for_each_index(size_t(M), M > 1, [&](size_t m) {
    const float* xm = x + m * C;
    float* ym = y + m * C;
    float mean = 0, var = 0;
    for (int i = 0; i < C; i++) mean += xm[i];
    mean /= C;
    for (int i = 0; i < C; i++) var += (xm[i] - mean) * (xm[i] - mean);  // two passes: no cancellation
    const float r = 1.0f / std::sqrt(var / C + eps);
    for (int i = 0; i < C; i++) ym[i] = (xm[i] - mean) * r * w[i] + b[i];
  });
}

// --- elementwise ---------------------------------------------------------------------------------

void add_inplace(float* __restrict y, const float* __restrict x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

// GELU and SwiGLU run on vectors (train_simd's kernels, tanh and e^x from libmvec: within 3 and 1
// ulp of tanhf, expf) when the active ISA has them, else the scalar loop, in blocks of
// kActivationBlock elements (over the threads for large n). Each element's bits depend only on its
// own inputs, whatever the range a call is given: prefill applies them to whole rows, a decode step
// to the rows a thread took, and both get the same bits.
constexpr size_t kActivationBlock = 4096;
constexpr size_t kActivationParallelMin = size_t(1) << 16;

// fn(b, e) for the blocks [b, e) of kActivationBlock elements that cover [0, n).
template <typename Fn>
void for_each_activation_block(size_t n, Fn fn) {
  const size_t blocks = (n + kActivationBlock - 1) / kActivationBlock;
  for_each_index(blocks, n > kActivationParallelMin, [&](size_t blk) {
    const size_t b = blk * kActivationBlock;
    fn(b, std::min(n, b + kActivationBlock));
  });
}

void gelu_tanh_inplace(float* x, size_t n) {
  const float s = 0.7978845608028654f;  // √(2/π)
  const bool simd = train_simd_available();
  for_each_activation_block(n, [&](size_t b, size_t e) {
    if (simd) return gelu_forward_simd(x + b, nullptr, x + b, e - b);
    for (size_t i = b; i < e; i++) {
      const float v = x[i];
      x[i] = 0.5f * v * (1.0f + std::tanh(s * (v + 0.044715f * v * v * v)));
    }
  });
}

void swiglu(float* h, const float* gate, const float* up, size_t n) {
  const bool simd = train_simd_available();
  for_each_activation_block(n, [&](size_t b, size_t e) {
    if (simd) return swiglu_forward_simd(h + b, gate + b, up + b, e - b);
    for (size_t i = b; i < e; i++) h[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];  // g·σ(g)·u
  });
}

void softmax_inplace(float* x, int n) { isa_kernels().softmax(x, n); }

// --- embeddings and positions --------------------------------------------------------------------

void embedding_row(float* out, const void* table, DType dt, int64_t id, int C) {
  const uint8_t* row = static_cast<const uint8_t*>(table) + size_t(id) * dtype_bytes(dt, size_t(C));
  isa_kernels().to_f32(out, row, dt, size_t(C));
}

// Pair i of every head, (x[2i], x[2i+1]), turns by the angle pos·freq with
// freq = 1 / theta^(2i/HS) (llama2.c). The HS/2 angles are the same for every head, so their
// cos/sin are computed once per position.
void rope_angles(float* cs, int head_dim, int pos, float theta) {
  std::vector<float> inv_freq(static_cast<size_t>(head_dim / 2));
  rope_frequencies(inv_freq.data(), head_dim, theta);
  rope_angles(cs, inv_freq.data(), head_dim, pos);
}

void rope_frequencies(float* inv_freq, int head_dim, float theta) {
  for (int i = 0; i < head_dim / 2; i++) inv_freq[i] = 1.0f / std::pow(theta, float(2 * i) / float(head_dim));
}

void rope_angles(float* cs, const float* inv_freq, int head_dim, int pos) {
  for (int i = 0; i < head_dim / 2; i++) {
    const float a = float(pos) * inv_freq[i];
    cs[2 * i] = std::cos(a);
    cs[2 * i + 1] = std::sin(a);
  }
}

void rope_rotate(float* x, const float* cs, int head_dim, int c0, int c1) {
  for (int c = c0; c < c1; c += 2) {
    const int i = (c % head_dim) / 2;  // pair index within the head
    const float co = cs[2 * i], si = cs[2 * i + 1];
    const float x0 = x[c], x1 = x[c + 1];
    x[c] = x0 * co - x1 * si;
    x[c + 1] = x0 * si + x1 * co;
  }
}

void rope(float* x, int n_heads, int head_dim, int pos, float theta) {
  std::vector<float> cs(static_cast<size_t>(head_dim));  // cs[2i] = cos, cs[2i+1] = sin of pair i's angle
  rope_angles(cs.data(), head_dim, pos, theta);
  rope_rotate(x, cs.data(), head_dim, 0, n_heads * head_dim);
}

}  // namespace orion::cpu
