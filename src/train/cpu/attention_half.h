// The attention half of a pre-norm transformer block, backward, as every family's CPU block has it
// (train/family/*/…_cpu_train.cpp). Each family keeps its own norm, positions (RoPE between the two
// calls) and feed-forward; the projections and the attention in between are the same math:
//
//   q = xn·wqᵀ (+ bq) [N, NH·HS],  k = xn·wkᵀ (+ bk), v = xn·wvᵀ (+ bv) [N, NKV·HS]
//   atty = causal_attention(q, k, v)                                   [N, NH·HS]
//   x1 = x + atty·woᵀ (+ bo)                                          [N, C]
//
// Biases are used when the family has them (null pointers otherwise). With a FrozenBase sink (LoRA
// training) no weight gradient is formed and each adapted projection reports its X and dY instead.
#pragma once
#include "train/model/params.h"
#include "train/model/trainer_api.h"

namespace orion::train {

// Shapes of one block's attention for N = B·T tokens.
struct AttentionShape {
  int B, T, C, NH, NKV, HS;
  int N() const { return B * T; }
  int Q() const { return NH * HS; }
  int KV() const { return NKV * HS; }
};

// From dx1 [N, C] (the gradient of the first residual's output) back to dq [N, Q], dk, dv [N, KV]
// (written; before any RoPE backward):
//   datty = dx1·wo,  dwo += dx1ᵀ·atty (dbo += Σ dx1);  dq, dk, dv = attention_backward(datty)
// att, q, k, v are the forward's saved probabilities and (rotated) projections; datty [N, Q] scratch.
void attention_output_backward(const FrozenBase& f, int layer, const LayerParams& w, LayerParams& dw,
                               const AttentionShape& s, const float* dx1, const float* atty, const float* att,
                               const float* q, const float* k, const float* v, float* datty, float* dq, float* dk,
                               float* dv);

// From dq, dk, dv back through the three projections of xn [N, C]: xn fed all three, so its gradient
// is the sum dxn = dq·wq + dk·wk + dv·wv (written), and dwq += dqᵀ·xn, … (dbq += Σ dq, …).
void qkv_projection_backward(const FrozenBase& f, int layer, const LayerParams& w, LayerParams& dw, const AttentionShape& s,
                             const float* xn, const float* dq, const float* dk, const float* dv, float* dxn);

}  // namespace orion::train
