// Training a GPT-2 transformer block on the CPU: forward and backward, fp32 (llm.c's model).
//
// One block, for N = B·T tokens (model/family/gpt2/gpt2_block.cpp computes the same function for inference):
//
//   ln1 = layernorm(x) ⊙ attn_norm + attn_norm_b                 [N, C]
//   q = ln1·wqᵀ + bq,  k = ln1·wkᵀ + bk,  v = ln1·wvᵀ + bv        [N, C]  (NKV = NH: no GQA)
//   atty = causal_attention(q, k, v)                              [N, C]  (no RoPE: positions are
//                                                                          learned, added at the input)
//   x1 = x + atty·woᵀ + bo                                        [N, C]  first residual
//   ln2 = layernorm(x1) ⊙ ffn_norm + ffn_norm_b                   [N, C]
//   fch = ln2·w1ᵀ + b1                                            [N, H]  (H = 4C)
//   fchg = gelu(fch)                                              [N, H]  (tanh form)
//   y = x1 + fchg·w2ᵀ + b2                                        [N, C]  second residual
//
// The backward walks these lines bottom to top; biases collect the column sums of the gradients
// of their outputs.
#include <algorithm>

#include "base/error.h"
#include "train/cpu/attention_half.h"
#include "train/cpu/layers.h"
#include "train/family/gpt2/gpt2_training.h"

namespace orion::train {
namespace {

// What one layer keeps from its forward for its backward.
struct Gpt2Acts {
  std::vector<float> ln1, mean1, rstd1;  // [N, C], [N], [N]
  std::vector<float> q, k, v;            // [N, C]
  std::vector<float> att;                // [B, NH, T, T] attention probabilities
  std::vector<float> atty;               // [N, C] attention output, before wo
  std::vector<float> x1;                 // [N, C] residual after attention
  std::vector<float> ln2, mean2, rstd2;  // [N, C], [N], [N]
  std::vector<float> fch, fchg, fcth;    // [N, H] before and after GELU, and its tanh (for the backward)
};

class Gpt2CpuBlocks final : public BlockRunner {
 public:
  // Activations for ckpt.slots(L) blocks: all of them without gradient checkpointing.
  Gpt2CpuBlocks(const Params& p, Grads* g, int B, int T, const ActivationCheckpointing& ckpt) : p_(p), g_(g), ckpt_(ckpt) {
    const ModelConfig& c = p.config();
    ORION_CHECK(c.arch == Arch::GPT2, "GPT-2 block runner for a {} model", arch_name(c.arch));
    const size_t N = size_t(B) * T, C = c.dim, Q = size_t(c.n_heads) * c.head_dim(), KV = c.kv_dim(), H = c.hidden_dim;
    acts_.resize(size_t(ckpt.slots(c.n_layers)));
    for (Gpt2Acts& a : acts_) {
      a.ln1.resize(N * C), a.mean1.resize(N), a.rstd1.resize(N);
      a.q.resize(N * Q), a.k.resize(N * KV), a.v.resize(N * KV);
      a.att.resize(size_t(B) * c.n_heads * T * T), a.atty.resize(N * Q), a.x1.resize(N * C);
      a.ln2.resize(N * C), a.mean2.resize(N), a.rstd2.resize(N), a.fch.resize(N * H), a.fchg.resize(N * H),
          a.fcth.resize(N * H);
    }
    tmp_.resize(N * C);
    if (g_) {
      dx1_.resize(N * C), dln_.resize(N * C), datty_.resize(N * Q), dq_.resize(N * Q), dk_.resize(N * KV);
      dv_.resize(N * KV), dfch_.resize(N * H), dfchg_.resize(N * H);
    }
  }

  bool freeze_base(AdapterGradSink* sink) override {
    f_.sink = sink;
    return true;
  }

  const char* name() const override { return "cpu-gpt2"; }

  void forward_block(int l, const float* x, float* y, int B, int T) override {
    const ModelConfig& c = p_.config();
    const LayerParams& w = p_.layers[size_t(l)];
    Gpt2Acts& a = acts_[size_t(ckpt_.slot(l, c.n_layers))];
    const int N = B * T, C = c.dim, NH = c.n_heads, NKV = c.n_kv_heads, HS = c.head_dim(), Q = NH * HS, KV = NKV * HS,
              H = c.hidden_dim;
    // --- attention ---
    layernorm_forward(a.ln1.data(), a.mean1.data(), a.rstd1.data(), x, w.attn_norm, w.attn_norm_b, N, C, c.norm_eps);
    matmul_forward(a.q.data(), a.ln1.data(), w.wq, w.bq, N, C, Q);
    matmul_forward(a.k.data(), a.ln1.data(), w.wk, w.bk, N, C, KV);
    matmul_forward(a.v.data(), a.ln1.data(), w.wv, w.bv, N, C, KV);
    attention_forward(a.atty.data(), a.att.data(), a.q.data(), a.k.data(), a.v.data(), B, T, NH, NKV, HS);
    matmul_forward(tmp_.data(), a.atty.data(), w.wo, w.bo, N, Q, C);
    residual_forward(a.x1.data(), x, tmp_.data(), size_t(N) * C);
    // --- feed-forward (GELU) ---
    layernorm_forward(a.ln2.data(), a.mean2.data(), a.rstd2.data(), a.x1.data(), w.ffn_norm, w.ffn_norm_b, N, C, c.norm_eps);
    matmul_forward(a.fch.data(), a.ln2.data(), w.w1, w.b1, N, C, H);
    gelu_forward(a.fchg.data(), a.fcth.data(), a.fch.data(), size_t(N) * H);
    matmul_forward(tmp_.data(), a.fchg.data(), w.w2, w.b2, N, H, C);
    residual_forward(y, a.x1.data(), tmp_.data(), size_t(N) * C);
  }

  void backward_block(int l, const float* x, const float* dy, float* dx, int B, int T) override {
    ORION_CHECK(g_, "backward without gradient buffers");
    const ModelConfig& c = p_.config();
    const LayerParams& w = p_.layers[size_t(l)];
    LayerParams& dw = g_->layers[size_t(l)];
    Gpt2Acts& a = acts_[size_t(ckpt_.slot(l, c.n_layers))];
    const int N = B * T, C = c.dim, NH = c.n_heads, NKV = c.n_kv_heads, HS = c.head_dim(), H = c.hidden_dim;
    const size_t NC = size_t(N) * C, NH_ = size_t(N) * H;
    auto zero = [](std::vector<float>& v, size_t n) { std::fill_n(v.data(), n, 0.0f); };

    // --- feed-forward, in reverse ---
    // y = x1 + fchg·w2ᵀ + b2: the residual passes dy to x1 unchanged.
    std::copy_n(dy, NC, dx1_.data());
    zero(dfchg_, NH_);
    matmul_backward(dfchg_.data(), f_.grad(dw.w2), f_.grad(dw.b2), dy, a.fchg.data(), w.w2, N, H, C);
    f_.report(l, LoraTarget::W2, a.fchg.data(), dy, N);
    zero(dfch_, NH_);
    gelu_backward(dfch_.data(), dfchg_.data(), a.fch.data(), a.fcth.data(), NH_);
    zero(dln_, NC);
    matmul_backward(dln_.data(), f_.grad(dw.w1), f_.grad(dw.b1), dfch_.data(), a.ln2.data(), w.w1, N, C, H);
    f_.report(l, LoraTarget::W1, a.ln2.data(), dfch_.data(), N);
    layernorm_backward(dx1_.data(), dw.ffn_norm, dw.ffn_norm_b, dln_.data(), a.x1.data(), w.ffn_norm, a.mean2.data(),
                       a.rstd2.data(), N, C);

    // --- attention, in reverse (train/cpu/attention_half.h) ---
    // x1 = x + atty·woᵀ + bo: dx gets dx1 past the branch; ln1 fed the three projections.
    std::copy_n(dx1_.data(), NC, dx);
    const AttentionShape s{B, T, C, NH, NKV, HS};
    attention_output_backward(f_, l, w, dw, s, dx1_.data(), a.atty.data(), a.att.data(), a.q.data(), a.k.data(), a.v.data(),
                              datty_.data(), dq_.data(), dk_.data(), dv_.data());
    qkv_projection_backward(f_, l, w, dw, s, a.ln1.data(), dq_.data(), dk_.data(), dv_.data(), dln_.data());
    layernorm_backward(dx, dw.attn_norm, dw.attn_norm_b, dln_.data(), x, w.attn_norm, a.mean1.data(), a.rstd1.data(), N, C);
  }

 private:
  const Params& p_;
  Grads* g_;
  FrozenBase f_;  // adapter training: no dW, the adapted projections reported
  ActivationCheckpointing ckpt_;
  std::vector<Gpt2Acts> acts_;       // [ckpt_.slots(L)]
  std::vector<float> tmp_;           // [N, C] a branch's output before the residual add
  std::vector<float> dx1_, dln_;     // [N, C]
  std::vector<float> datty_, dq_;    // [N, C]
  std::vector<float> dk_, dv_;       // [N, C]
  std::vector<float> dfch_, dfchg_;  // [N, H]
};

}  // namespace

std::unique_ptr<BlockRunner> make_gpt2_cpu_blocks(const Params& params, Grads* grads, int B, int T,
                                                  const ActivationCheckpointing& ckpt) {
  return std::make_unique<Gpt2CpuBlocks>(params, grads, B, T, ckpt);
}

}  // namespace orion::train
