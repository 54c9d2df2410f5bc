// Forward/backward pairs of the transformer layers (see layers.h for shapes and conventions).
//
// Each backward is derived from its forward by the chain rule; the derivation is written above
// the code. Sums that cross rows (weight and bias gradients, keys shared by many queries) are
// split over threads by OUTPUT element and summed in a fixed order inside, never reduced across
// threads, so the bits do not depend on the thread count.
#include "train/cpu/layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_kernels.h"
#include "train/cpu/first_write_zero.h"

namespace orion::train {
namespace {
constexpr size_t kParallelMin = 1u << 14;  // below this many elements a loop stays on one thread
constexpr int kColBlock = 64;              // channels per task in column sums
constexpr size_t kBlock = 1 << 14;         // elements per task of the elementwise activations
}  // namespace

// ================================================================================================
// Embedding
// ================================================================================================

template <typename F>
void encoder_forward(F* out, const int* tokens, const F* wte, const F* wpe, int B, int T, int C) {
#pragma omp parallel for schedule(static) if (size_t(B) * T * C > kParallelMin)
  for (int n = 0; n < B * T; n++) {
    const F* e = wte + size_t(tokens[n]) * C;  // [C] the token's row
    F* o = out + size_t(n) * C;                // [C]
    if (wpe) {
      const F* p = wpe + size_t(n % T) * C;  // [C] the row of position t = n mod T
      for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    } else {
      std::memcpy(o, e, sizeof(F) * C);
    }
  }
}

// The lookup copies rows, so the gradient flows back to the rows that were read: every
// occurrence of a token adds its dout row to that token's embedding gradient (a token appearing
// twice gets the sum). Threads own blocks of channels and walk all rows in order.
template <typename F>
void encoder_backward(F* dwte, F* dwpe, const F* dout, const int* tokens, int B, int T, int C) {
#pragma omp parallel for schedule(static) if (size_t(B) * T * C > kParallelMin)
  for (int c0 = 0; c0 < C; c0 += kColBlock) {
    const int c1 = std::min(C, c0 + kColBlock);
    for (int n = 0; n < B * T; n++) {
      const F* d = dout + size_t(n) * C;
      F* de = dwte + size_t(tokens[n]) * C;
      for (int c = c0; c < c1; c++) de[c] += d[c];
      if (dwpe) {
        F* dp = dwpe + size_t(n % T) * C;
        for (int c = c0; c < c1; c++) dp[c] += d[c];
      }
    }
  }
}

// ================================================================================================
// RMSNorm
// ================================================================================================

// y_i = x_i · r · w_i  with  r = (mean_j x_j² + eps)^(−1/2)   (the same arithmetic as cpu::rmsnorm)
template <typename F>
void rmsnorm_forward(F* out, F* rstd, const F* inp, const F* w, int N, int C, float eps) {
#pragma omp parallel for schedule(static) if (size_t(N) * C > kParallelMin)
  for (int n = 0; n < N; n++) {
    const F* x = inp + size_t(n) * C;  // [C]
    F* y = out + size_t(n) * C;        // [C]
    F ss = 0;
    for (int i = 0; i < C; i++) ss += x[i] * x[i];
    const F r = F(1) / std::sqrt(ss / F(C) + F(eps));
    for (int i = 0; i < C; i++) y[i] = x[i] * r * w[i];
    rstd[n] = r;
  }
}

// With g_i = dy_i · w_i:
//   ∂r/∂x_j = −r³ · x_j / C          (r = (Σx²/C + eps)^(−1/2))
//   dx_j = Σ_i g_i ∂(x_i r)/∂x_j = r·g_j − (r³/C) · x_j · Σ_i g_i x_i
//   dw_i = Σ_rows dy_i · x_i · r
template <typename F>
void rmsnorm_backward(F* dinp, F* dw, const F* dout, const F* inp, const F* w, const F* rstd, int N, int C) {
#pragma omp parallel for schedule(static) if (size_t(N) * C > kParallelMin)
  for (int n = 0; n < N; n++) {
    const F* x = inp + size_t(n) * C;
    const F* dy = dout + size_t(n) * C;
    F* dx = dinp + size_t(n) * C;
    const F r = rstd[n];
    F gx = 0;  // Σ_i g_i x_i
    for (int i = 0; i < C; i++) gx += dy[i] * w[i] * x[i];
    const F k = r * r * r / F(C) * gx;
    for (int i = 0; i < C; i++) dx[i] += r * dy[i] * w[i] - k * x[i];
  }
#pragma omp parallel for schedule(static) if (size_t(N) * C > kParallelMin)
  for (int c0 = 0; c0 < C; c0 += kColBlock) {
    const int c1 = std::min(C, c0 + kColBlock);
    for (int n = 0; n < N; n++) {
      const F* x = inp + size_t(n) * C;
      const F* dy = dout + size_t(n) * C;
      for (int c = c0; c < c1; c++) dw[c] += dy[c] * x[c] * rstd[n];
    }
  }
}

// ================================================================================================
// LayerNorm
// ================================================================================================

// x̂ = (x − μ)·r, y = x̂ ⊙ w + b with μ = mean(x), r = (mean((x − μ)²) + eps)^(−1/2)
// (two passes for the variance, as cpu::layernorm: no cancellation)
template <typename F>
void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* w, const F* b, int N, int C, float eps) {
#pragma omp parallel for schedule(static) if (size_t(N) * C > kParallelMin)
  for (int n = 0; n < N; n++) {
    const F* x = inp + size_t(n) * C;
    F* y = out + size_t(n) * C;
    F mu = 0, var = 0;
    for (int i = 0; i < C; i++) mu += x[i];
    mu /= F(C);
    for (int i = 0; i < C; i++) var += (x[i] - mu) * (x[i] - mu);
    const F r = F(1) / std::sqrt(var / F(C) + F(eps));
    for (int i = 0; i < C; i++) y[i] = (x[i] - mu) * r * w[i] + b[i];
    mean[n] = mu, rstd[n] = r;
  }
}

// With g = dy ⊙ w (the gradient reaching x̂):
//   x̂ depends on every x_j through μ and r:  ∂x̂_i/∂x_j = r·([i = j] − 1/C − x̂_i x̂_j / C)
//   so dx_j = r · (g_j − mean(g) − x̂_j · mean(g ⊙ x̂))
//   dw = Σ_rows dy ⊙ x̂,  db = Σ_rows dy
template <typename F>
void layernorm_backward(F* dinp, F* dw, F* db, const F* dout, const F* inp, const F* w, const F* mean, const F* rstd, int N,
                        int C) {
#pragma omp parallel for schedule(static) if (size_t(N) * C > kParallelMin)
  for (int n = 0; n < N; n++) {
    const F* x = inp + size_t(n) * C;
    const F* dy = dout + size_t(n) * C;
    F* dx = dinp + size_t(n) * C;
    const F mu = mean[n], r = rstd[n];
    F gmean = 0, gxmean = 0;  // mean(g), mean(g ⊙ x̂)
    for (int i = 0; i < C; i++) {
      const F g = dy[i] * w[i];
      gmean += g;
      gxmean += g * (x[i] - mu) * r;
    }
    gmean /= F(C), gxmean /= F(C);
    for (int i = 0; i < C; i++) dx[i] += r * (dy[i] * w[i] - gmean - (x[i] - mu) * r * gxmean);
  }
#pragma omp parallel for schedule(static) if (size_t(N) * C > kParallelMin)
  for (int c0 = 0; c0 < C; c0 += kColBlock) {
    const int c1 = std::min(C, c0 + kColBlock);
    for (int n = 0; n < N; n++) {
      const F* x = inp + size_t(n) * C;
      const F* dy = dout + size_t(n) * C;
      for (int c = c0; c < c1; c++) {
        dw[c] += dy[c] * (x[c] - mean[n]) * rstd[n];
        db[c] += dy[c];
      }
    }
  }
}

// ================================================================================================
// Linear layer
// ================================================================================================

// out[n, o] = Σ_i inp[n, i]·W[o, i] + bias[o]. In float: cpu::matmul_forward_train (with AVX-512
// the transposed broadcast-FMA product, ~1.5× the inference kernel's speed on a training batch; its
// sums run in another order than Transformer::forward's, so the two agree to rounding, not bits).
template <>
void matmul_forward<float>(float* out, const float* inp, const float* W, const float* bias, int N, int IC, int OC) {
  cpu::matmul_forward_train(out, inp, W, bias, N, IC, OC);
}
template <>
void matmul_forward<double>(double* out, const double* inp, const double* W, const double* bias, int N, int IC, int OC) {
#pragma omp parallel for schedule(static) if (size_t(N) * IC * OC > kParallelMin)
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double s = bias ? bias[o] : 0.0;
      for (int i = 0; i < IC; i++) s += inp[size_t(n) * IC + i] * W[size_t(o) * IC + i];
      out[size_t(n) * OC + o] = s;
    }
}

// y = x·Wᵀ + b is linear in each of x, W, b:
//   dx[n, i] = Σ_o dy[n, o]·W[o, i]        (dx = dy·W)
//   dW[o, i] = Σ_n dy[n, o]·x[n, i]        (dW = dyᵀ·x)
//   db[o]    = Σ_n dy[n, o]
template <>
void matmul_backward<float>(float* dinp, float* dW, float* dbias, const float* dout, const float* inp, const float* W, int N,
                            int IC, int OC) {
  if (dinp) cpu::matmul_backward_input(dinp, dout, W, N, IC, OC);
  if (dW)  // a pending gradient (zeroing left to its first write) is overwritten: dW = doutᵀ·inp
    cpu::matmul_backward_weight(dW, dout, inp, N, IC, OC,
                                first_write(dW, size_t(OC) * IC) ? cpu::COut::OverwriteCold : cpu::COut::Accumulate);
  if (dbias) cpu::bias_backward(dbias, dout, N, OC);
}
template <>
void matmul_backward<double>(double* dinp, double* dW, double* dbias, const double* dout, const double* inp, const double* W,
                             int N, int IC, int OC) {
  const bool big = size_t(N) * IC * OC > kParallelMin;
  if (dinp) {
#pragma omp parallel for schedule(static) if (big)
    for (int n = 0; n < N; n++)
      for (int o = 0; o < OC; o++)
        for (int i = 0; i < IC; i++) dinp[size_t(n) * IC + i] += dout[size_t(n) * OC + o] * W[size_t(o) * IC + i];
  }
#pragma omp parallel for schedule(static) if (big)
  for (int o = 0; o < OC; o++)
    for (int n = 0; n < N; n++) {
      if (dW)
        for (int i = 0; i < IC; i++) dW[size_t(o) * IC + i] += dout[size_t(n) * OC + o] * inp[size_t(n) * IC + i];
      if (dbias) dbias[o] += dout[size_t(n) * OC + o];
    }
}

// ================================================================================================
// RoPE
// ================================================================================================

namespace {
// cos/sin of the angle of pair i at time t, cs[(t·P + i)·2 + {0, 1}], P = HS/2 — computed in
// float exactly as cpu::rope does, so training and inference rotate by the same angles.
std::vector<float> rope_table(int T, int HS, const float* inv_freq) {
  const int P = HS / 2;
  std::vector<float> cs(size_t(T) * P * 2);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < P; i++) {
      const float a = float(t) * inv_freq[i];
      cs[(size_t(t) * P + i) * 2] = std::cos(a);
      cs[(size_t(t) * P + i) * 2 + 1] = std::sin(a);
    }
  return cs;
}

// The plain frequencies θ^(−2i/HS), as cpu::rope_frequencies computes them.
std::vector<float> plain_frequencies(int HS, float theta) {
  std::vector<float> f(size_t(HS / 2));
  for (int i = 0; i < HS / 2; i++) f[size_t(i)] = 1.0f / std::pow(theta, float(2 * i) / float(HS));
  return f;
}

// Rotates every pair by +angle (sign = 1) or −angle (sign = −1):
//   [y0]   [cos  −sin] [x0]
//   [y1] = [sin   cos] [x1]
template <typename F>
void rope_rotate(F* out, const F* inp, int B, int T, int NHx, int HS, const float* inv_freq, F sign) {
  const std::vector<float> cs = rope_table(T, HS, inv_freq);
  const int P = HS / 2, D = NHx * HS;
#pragma omp parallel for schedule(static) if (size_t(B) * T * D > kParallelMin)
  for (int n = 0; n < B * T; n++) {
    const float* ct = cs.data() + size_t(n % T) * P * 2;
    for (int h = 0; h < NHx; h++) {
      const F* x = inp + size_t(n) * D + size_t(h) * HS;
      F* y = out + size_t(n) * D + size_t(h) * HS;
      for (int i = 0; i < P; i++) {
        const F c = ct[2 * i], s = sign * F(ct[2 * i + 1]);
        const F x0 = x[2 * i], x1 = x[2 * i + 1];
        y[2 * i] = x0 * c - x1 * s;
        y[2 * i + 1] = x0 * s + x1 * c;
      }
    }
  }
}
}  // namespace

template <typename F>
void rope_forward(F* out, const F* inp, int B, int T, int NHx, int HS, const float* inv_freq) {
  rope_rotate(out, inp, B, T, NHx, HS, inv_freq, F(1));
}

template <typename F>
void rope_forward(F* out, const F* inp, int B, int T, int NHx, int HS, float theta) {
  rope_forward(out, inp, B, T, NHx, HS, plain_frequencies(HS, theta).data());
}

// y = R·x with R orthogonal, so dx = Rᵀ·dy = R(−angle)·dy.
template <typename F>
void rope_backward(F* dinp, const F* dout, int B, int T, int NHx, int HS, const float* inv_freq) {
  rope_rotate(dinp, dout, B, T, NHx, HS, inv_freq, F(-1));
}

template <typename F>
void rope_backward(F* dinp, const F* dout, int B, int T, int NHx, int HS, float theta) {
  rope_backward(dinp, dout, B, T, NHx, HS, plain_frequencies(HS, theta).data());
}

// ================================================================================================
// Causal self-attention
// ================================================================================================

// One task per (b, h, t): scores against keys 0..t, a stable softmax (subtract the max so every
// exp ≤ 1), then the probability-weighted sum of values. Query head h reads kv head h/(NH/NKV).
// With AVX-512 or AVX2 one task per (b, h): the head's rows as register-tiled products
// (cpu::attention_head_forward_simd).
template <typename F>
void attention_forward(F* out, F* att, const F* q, const F* k, const F* v, int B, int T, int NH, int NKV, int HS,
                       int window) {
  const int Q = NH * HS, KV = NKV * HS, group = NH / NKV;
  const F scale = F(1) / std::sqrt(F(HS));
  const bool parallel = size_t(B) * NH * T * T * HS > kParallelMin;
  if constexpr (std::is_same_v<F, float>)
    if (cpu::attention_simd_available(HS)) {
#pragma omp parallel for schedule(static) if (parallel)
      for (int task = 0; task < B * NH; task++) {
        const int b = task / NH, h = task % NH, g = h / group;
        const size_t q0 = size_t(b) * T * Q + size_t(h) * HS, kv0 = size_t(b) * T * KV + size_t(g) * HS;  // time 0
        cpu::attention_head_forward_simd(out + q0, att + size_t(task) * T * T, q + q0, k + kv0, v + kv0, size_t(Q),
                                         size_t(KV), T, HS, scale, window);
      }
      return;
    }
#pragma omp parallel for schedule(static, 1) if (parallel)
  for (int task = 0; task < B * NH * T; task++) {
    const int b = task / (NH * T), h = task / T % NH, t = task % T, g = h / group;
    const F* qt = q + (size_t(b) * T + t) * Q + size_t(h) * HS;  // [HS]
    F* p = att + ((size_t(b) * NH + h) * T + t) * T;             // [T] row t of the probabilities
    const int s0 = cpu::attention_start(t, window);  // the first key this query sees
    for (int s = 0; s < s0; s++) p[s] = 0;           // slid out of the window: probability 0
    F mx = -INFINITY;
    for (int s = s0; s <= t; s++) {
      const F* ks = k + (size_t(b) * T + s) * KV + size_t(g) * HS;  // [HS]
      F d = 0;
      for (int i = 0; i < HS; i++) d += qt[i] * ks[i];
      p[s] = d * scale;
      mx = std::max(mx, p[s]);
    }
    F sum = 0;
    for (int s = s0; s <= t; s++) sum += (p[s] = std::exp(p[s] - mx));
    const F inv = F(1) / sum;
    for (int s = s0; s <= t; s++) p[s] *= inv;
    for (int s = t + 1; s < T; s++) p[s] = 0;               // masked: the future has probability 0
    F* o = out + (size_t(b) * T + t) * Q + size_t(h) * HS;  // [HS]
    for (int i = 0; i < HS; i++) o[i] = 0;
    for (int s = s0; s <= t; s++) {
      const F* vs = v + (size_t(b) * T + s) * KV + size_t(g) * HS;
      for (int i = 0; i < HS; i++) o[i] += p[s] * vs[i];
    }
  }
}

// With P = softmax(S), S_ts = q_t·k_s/√HS, o_t = Σ_s P_ts v_s  (one head, one sequence):
//   dP_ts = do_t · v_s                    dv_s += Σ_t P_ts · do_t
//   softmax's Jacobian: dS_ts = P_ts · (dP_ts − Σ_u P_tu dP_tu)
//   dq_t = Σ_s dS_ts · k_s / √HS          dk_s += Σ_t dS_ts · q_t / √HS
// Keys and values of kv head g are shared by the NH/NKV query heads of its group, so one task per
// (b, g) owns dk, dv of that head and walks its query heads and times in order.
template <typename F>
void attention_backward(F* dq, F* dk, F* dv, const F* dout, const F* att, const F* q, const F* k, const F* v, int B, int T,
                        int NH, int NKV, int HS) {
  const int Q = NH * HS, KV = NKV * HS, group = NH / NKV;
  const F scale = F(1) / std::sqrt(F(HS));
  const bool parallel = size_t(B) * NH * T * T * HS > kParallelMin;
  if constexpr (std::is_same_v<F, float>)
    if (cpu::attention_simd_available(HS)) {  // a head at a time as register-tiled products (AVX-512, AVX2)
#pragma omp parallel for schedule(static, 1) if (parallel)
      for (int task = 0; task < B * NKV; task++) {
        const int b = task / NKV, g = task % NKV;
        const size_t kv0 = size_t(b) * T * KV + size_t(g) * HS;  // time 0 of kv head g
        for (int h = g * group; h < (g + 1) * group; h++) {
          const size_t q0 = size_t(b) * T * Q + size_t(h) * HS;
          cpu::attention_head_backward_simd(dq + q0, dk + kv0, dv + kv0, dout + q0, att + (size_t(b) * NH + h) * T * T, q + q0,
                                            k + kv0, v + kv0, size_t(Q), size_t(KV), T, HS, scale);
        }
      }
      return;
    }
#pragma omp parallel if (parallel)
  {
    std::vector<F> dp(static_cast<size_t>(T));  // [T] dP (then dS) of one query row
#pragma omp for schedule(static, 1)
    for (int task = 0; task < B * NKV; task++) {
      const int b = task / NKV, g = task % NKV;
      for (int h = g * group; h < (g + 1) * group; h++)
        for (int t = 0; t < T; t++) {
          const F* p = att + ((size_t(b) * NH + h) * T + t) * T;           // [T]
          const F* dot = dout + (size_t(b) * T + t) * Q + size_t(h) * HS;  // [HS]
          const F* qt = q + (size_t(b) * T + t) * Q + size_t(h) * HS;      // [HS]
          F* dqt = dq + (size_t(b) * T + t) * Q + size_t(h) * HS;          // [HS]
          F pdp = 0;  // Σ_u P_tu dP_tu
          for (int s = 0; s <= t; s++) {
            const F* vs = v + (size_t(b) * T + s) * KV + size_t(g) * HS;
            F* dvs = dv + (size_t(b) * T + s) * KV + size_t(g) * HS;
            F d = 0;
            for (int i = 0; i < HS; i++) {
              d += dot[i] * vs[i];
              dvs[i] += p[s] * dot[i];
            }
            dp[size_t(s)] = d;
            pdp += p[s] * d;
          }
          for (int s = 0; s <= t; s++) {
            const F ds = p[s] * (dp[size_t(s)] - pdp) * scale;  // dS_ts / √HS
            const F* ks = k + (size_t(b) * T + s) * KV + size_t(g) * HS;
            F* dks = dk + (size_t(b) * T + s) * KV + size_t(g) * HS;
            for (int i = 0; i < HS; i++) {
              dqt[i] += ds * ks[i];
              dks[i] += ds * qt[i];
            }
          }
        }
    }
  }
}

// ================================================================================================
// Activations and residuals
// ================================================================================================

// silu(g) = g·σ(g), σ(g) = 1/(1 + e^(−g)); out = silu(gate)·up (as cpu::swiglu).
// In float with AVX-512 or AVX2 16 or 8 at a time (cpu::swiglu_*_simd: the same operations, e^(−g)
// from the vector math library).

template <typename F>
void swiglu_forward(F* out, const F* gate, const F* up, size_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    if constexpr (std::is_same_v<F, float>)
      if (cpu::train_simd_available()) {
        cpu::swiglu_forward_simd(out + b, gate + b, up + b, e - b);
        continue;
      }
    for (size_t i = b; i < e; i++) out[i] = gate[i] / (F(1) + std::exp(-gate[i])) * up[i];
  }
}

// silu'(g) = σ(g) + g·σ(g)(1 − σ(g)) = σ(g)·(1 + g·(1 − σ(g)))
//   dgate += dout · up · silu'(gate),   dup += dout · silu(gate)
template <typename F>
void swiglu_backward(F* dgate, F* dup, const F* dout, const F* gate, const F* up, size_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    if constexpr (std::is_same_v<F, float>)
      if (cpu::train_simd_available()) {
        cpu::swiglu_backward_simd(dgate + b, dup + b, dout + b, gate + b, up + b, e - b);
        continue;
      }
    for (size_t i = b; i < e; i++) {
      const F g = gate[i], sig = F(1) / (F(1) + std::exp(-g));
      dgate[i] += dout[i] * up[i] * sig * (F(1) + g * (F(1) - sig));
      dup[i] += dout[i] * g * sig;
    }
  }
}

namespace {
constexpr double kGeluS = 0.7978845608028654;  // √(2/π)
constexpr double kGeluA = 0.044715;
}  // namespace

// In float with AVX-512 or AVX2: cpu::gelu_forward_simd / gelu_backward_simd (the same formula, 16
// or 8 at a time; the tanh from the vector math library, within 3 ulp of tanhf).
template <typename F>
void gelu_forward(F* out, F* th, const F* inp, size_t n) {
  const F s = F(kGeluS), a = F(kGeluA);
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    if constexpr (std::is_same_v<F, float>)
      if (th && cpu::train_simd_available()) {
        cpu::gelu_forward_simd(out + b, th + b, inp + b, e - b);
        continue;
      }
    for (size_t i = b; i < e; i++) {
      const F x = inp[i], t = std::tanh(s * (x + a * x * x * x));
      if (th) th[i] = t;
      out[i] = F(0.5) * x * (F(1) + t);
    }
  }
}

// With u = s(x + a x³) and y = ½x(1 + tanh u):
//   dy/dx = ½(1 + tanh u) + ½x · (1 − tanh² u) · s(1 + 3a x²)
template <typename F>
void gelu_backward(F* dinp, const F* dout, const F* inp, const F* th, size_t n) {
  const F s = F(kGeluS), a = F(kGeluA);
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    if constexpr (std::is_same_v<F, float>)
      if (th && cpu::train_simd_available()) {
        cpu::gelu_backward_simd(dinp + b, dout + b, inp + b, th + b, e - b);
        continue;
      }
    for (size_t i = b; i < e; i++) {
      const F x = inp[i], t = th ? th[i] : std::tanh(s * (x + a * x * x * x));
      const F grad = F(0.5) * (F(1) + t) + F(0.5) * x * (F(1) - t * t) * s * (F(1) + F(3) * a * x * x);
      dinp[i] += dout[i] * grad;
    }
  }
}

template <typename F>
void residual_forward(F* out, const F* a, const F* b, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// A sum passes its gradient unchanged to both inputs.
template <typename F>
void residual_backward(F* da, F* db, const F* dout, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; i++) da[i] += dout[i], db[i] += dout[i];
}

// ================================================================================================
// Cross-entropy
// ================================================================================================

// −log softmax_y(l) = log Σ_v e^(l_v) − l_y; the log-sum-exp is taken around the row's max so no
// exp overflows. The sum is accumulated in double (a 50257-term sum in float loses digits). In float
// with AVX-512 or AVX2 both loss kernels run 16 or 8 lanes at a time (cpu::exp_sum_simd,
// softmax_scaled_simd).
template <typename F>
int crossentropy_forward(F* losses, F* lse, const F* logits, const int* targets, int N, int V) {
  int bad = -1;  // a position whose target is out of range (the last one, for the message)
  const bool simd = std::is_same_v<F, float> && cpu::train_simd_available();
#pragma omp parallel for schedule(static) reduction(max : bad) if (size_t(N) * V > kParallelMin)
  for (int n = 0; n < N; n++) {
    const F* l = logits + size_t(n) * V;  // [V]
    const int y = targets[n];
    if (y < -1 || y >= V) bad = n;
    if (y < 0 || y >= V) {
      losses[n] = 0, lse[n] = 0;
      continue;
    }
    F mx = l[0];
    double s = 0;
    if constexpr (std::is_same_v<F, float>)
      if (simd) s = cpu::exp_sum_simd(l, V, &mx);  // 16 lanes (AVX-512) or 8 (AVX2)
    if (!simd) {
      for (int i = 1; i < V; i++) mx = std::max(mx, l[i]);
      for (int i = 0; i < V; i++) s += std::exp(double(l[i] - mx));
    }
    lse[n] = mx + F(std::log(s));
    losses[n] = lse[n] - l[y];
  }
  if (bad >= 0)
    throw_usage_error(fmt::format("target {} at position {} is outside the vocabulary of {}", targets[bad], bad, V),
                      "targets", "targets are token ids, or −1 for positions without a loss");
  int count = 0;
  for (int n = 0; n < N; n++) count += targets[n] >= 0;
  return count;
}

// ∂(lse − l_y)/∂l_v = softmax_v − [v = y]
template <typename F>
void crossentropy_backward(F* dlogits, const F* logits, const F* lse, const int* targets, F scale, int N, int V) {
  const bool simd = std::is_same_v<F, float> && cpu::train_simd_available();
#pragma omp parallel for schedule(static) if (size_t(N) * V > kParallelMin)
  for (int n = 0; n < N; n++) {
    const F* l = logits + size_t(n) * V;
    F* d = dlogits + size_t(n) * V;
    const int y = targets[n];
    if (y < 0) {
      for (int i = 0; i < V; i++) d[i] = 0;
      continue;
    }
    const F m = lse[n];
    if constexpr (std::is_same_v<F, float>)
      if (simd) {
        cpu::softmax_scaled_simd(d, l, m, scale, V);  // 16 lanes (AVX-512) or 8 (AVX2)
        d[y] -= scale;
        continue;
      }
    for (int i = 0; i < V; i++) d[i] = scale * std::exp(l[i] - m);
    d[y] -= scale;
  }
}

// ================================================================================================
// Instantiations: float for training, double for the gradient checks.
// ================================================================================================

#define ORION_TRAIN_LAYERS(F)                                                                                           \
  template void encoder_forward<F>(F*, const int*, const F*, const F*, int, int, int);                                  \
  template void encoder_backward<F>(F*, F*, const F*, const int*, int, int, int);                                       \
  template void rmsnorm_forward<F>(F*, F*, const F*, const F*, int, int, float);                                        \
  template void rmsnorm_backward<F>(F*, F*, const F*, const F*, const F*, const F*, int, int);                          \
  template void layernorm_forward<F>(F*, F*, F*, const F*, const F*, const F*, int, int, float);                        \
  template void layernorm_backward<F>(F*, F*, F*, const F*, const F*, const F*, const F*, const F*, int, int);          \
  template void rope_forward<F>(F*, const F*, int, int, int, int, float);                                               \
  template void rope_backward<F>(F*, const F*, int, int, int, int, float);                                              \
  template void rope_forward<F>(F*, const F*, int, int, int, int, const float*);                                        \
  template void rope_backward<F>(F*, const F*, int, int, int, int, const float*);                                       \
  template void attention_forward<F>(F*, F*, const F*, const F*, const F*, int, int, int, int, int, int);               \
  template void attention_backward<F>(F*, F*, F*, const F*, const F*, const F*, const F*, const F*, int, int, int, int, \
                                      int);                                                                             \
  template void swiglu_forward<F>(F*, const F*, const F*, size_t);                                                      \
  template void swiglu_backward<F>(F*, F*, const F*, const F*, const F*, size_t);                                       \
  template void gelu_forward<F>(F*, F*, const F*, size_t);                                                              \
  template void gelu_backward<F>(F*, const F*, const F*, const F*, size_t);                                             \
  template void residual_forward<F>(F*, const F*, const F*, size_t);                                                    \
  template void residual_backward<F>(F*, F*, const F*, size_t);                                                         \
  template int crossentropy_forward<F>(F*, F*, const F*, const int*, int, int);                                         \
  template void crossentropy_backward<F>(F*, const F*, const F*, const int*, F, int, int);

ORION_TRAIN_LAYERS(float)
ORION_TRAIN_LAYERS(double)

}  // namespace orion::train
