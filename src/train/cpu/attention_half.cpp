#include "train/cpu/attention_half.h"

#include <algorithm>

#include "train/cpu/layers.h"

namespace orion::train {

void attention_output_backward(const FrozenBase& f, int layer, const LayerParams& w, LayerParams& dw,
                               const AttentionShape& s, const float* dx1, const float* atty, const float* att,
                               const float* q, const float* k, const float* v, float* datty, float* dq, float* dk,
                               float* dv) {
  const int N = s.N(), Q = s.Q(), KV = s.KV();
  // x1 = x + atty·woᵀ (+ bo): the branch gets dx1.
  std::fill_n(datty, size_t(N) * Q, 0.0f);
  matmul_backward(datty, f.grad(dw.wo), f.grad(dw.bo), dx1, atty, w.wo, N, Q, s.C);
  f.report(layer, LoraTarget::O, atty, dx1, N);
  std::fill_n(dq, size_t(N) * Q, 0.0f), std::fill_n(dk, size_t(N) * KV, 0.0f), std::fill_n(dv, size_t(N) * KV, 0.0f);
  attention_backward(dq, dk, dv, datty, att, q, k, v, s.B, s.T, s.NH, s.NKV, s.HS);
}

void qkv_projection_backward(const FrozenBase& f, int layer, const LayerParams& w, LayerParams& dw, const AttentionShape& s,
                             const float* xn, const float* dq, const float* dk, const float* dv, float* dxn) {
  const int N = s.N(), C = s.C, Q = s.Q(), KV = s.KV();
  std::fill_n(dxn, size_t(N) * C, 0.0f);
  matmul_backward(dxn, f.grad(dw.wq), f.grad(dw.bq), dq, xn, w.wq, N, C, Q);
  f.report(layer, LoraTarget::Q, xn, dq, N);
  matmul_backward(dxn, f.grad(dw.wk), f.grad(dw.bk), dk, xn, w.wk, N, C, KV);
  f.report(layer, LoraTarget::K, xn, dk, N);
  matmul_backward(dxn, f.grad(dw.wv), f.grad(dw.bv), dv, xn, w.wv, N, C, KV);
  f.report(layer, LoraTarget::V, xn, dv, N);
}

}  // namespace orion::train
