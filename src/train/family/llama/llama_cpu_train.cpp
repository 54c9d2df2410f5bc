// Training a Llama-family transformer block on the CPU: forward and backward, fp32. Llama's
// relatives (Qwen2, Qwen3, Mistral) run it too, their differences read from the data: q/k/v biases
// and q/k norms when the layer has those tensors, the RoPE frequencies (llama3 scaling) and the
// sliding window from the config.
//
// One block, for N = B·T tokens (model/family/llama/llama_block.cpp computes the same function for inference):
//
//   xn1 = rmsnorm(x) ⊙ attn_norm                                 [N, C]
//   q = xn1·wqᵀ (+ bq) [N, NH·HS],  k = xn1·wkᵀ (+ bk), v = xn1·wvᵀ (+ bv) [N, NKV·HS]
//   (Qwen3) q, k = rmsnorm of each head ⊙ q_norm, k_norm              [HS per head]
//   q, k = rope(q), rope(k)                  (pairs (2i, 2i+1) turned by t·inv_freq[i])
//   atty = causal_attention(q, k, v)                              [N, NH·HS]   (GQA: NKV ≤ NH;
//                                                                   a sliding window when the config has one)
//   x1 = x + atty·woᵀ                                             [N, C]   first residual
//   xn2 = rmsnorm(x1) ⊙ ffn_norm                                  [N, C]
//   h1 = xn2·w1ᵀ, h3 = xn2·w3ᵀ                                    [N, H]   gate, up
//   hg = silu(h1) ⊙ h3                                            [N, H]   SwiGLU
//   y = x1 + hg·w2ᵀ                                               [N, C]   second residual
//
// The backward walks these lines bottom to top. Each residual sends its gradient both into the
// branch and straight past it, which is why dx1 starts as a copy of dy and dx as a copy of dx1.
// A bias adds a constant: the gradient passes it unchanged (and sums into dbq … when trained).
#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "model/family/family.h"
#include "model/family/llama/llama.h"
#include "train/cpu/attention_half.h"
#include "train/cpu/layers.h"
#include "train/family/llama/llama_training.h"

namespace orion::train {
namespace {

// What one layer keeps from its forward for its backward (llm.c's ActivationTensors, per layer).
struct LlamaActs {
  std::vector<float> xn1, rstd1;    // [N, C], [N]
  std::vector<float> q0, k0;        // [N, NH·HS], [N, NKV·HS] q, k before their head norms (Qwen3)
  std::vector<float> rstdq, rstdk;  // [N·NH], [N·NKV] their heads' 1/rms
  std::vector<float> q;             // [N, NH·HS]  after RoPE
  std::vector<float> k, v;          // [N, NKV·HS] (k after RoPE)
  std::vector<float> att;           // [B, NH, T, T] attention probabilities
  std::vector<float> atty;          // [N, NH·HS]  attention output, before wo
  std::vector<float> x1;            // [N, C]      residual after attention
  std::vector<float> xn2, rstd2;    // [N, C], [N]
  std::vector<float> h1, h3, hg;    // [N, H]      gate, up, silu(gate)·up
};

class LlamaCpuBlocks final : public BlockRunner {
 public:
  // Activations for ckpt.slots(L) blocks: all of them without gradient checkpointing.
  LlamaCpuBlocks(const Params& p, Grads* g, int B, int T, const ActivationCheckpointing& ckpt) : p_(p), g_(g), ckpt_(ckpt) {
    const ModelConfig& c = p.config();
    const Anatomy an = model_family(c.arch).anatomy();
    ORION_CHECK(an.norm == NormKind::RMSNorm && an.positions == Positions::Rope && an.gated_ffn,
                "Llama block runner for a {} model", arch_name(c.arch));
    const size_t N = size_t(B) * T, C = c.dim, Q = size_t(c.n_heads) * c.head_dim(), KV = c.kv_dim(), H = c.hidden_dim;
    acts_.resize(size_t(ckpt.slots(c.n_layers)));
    for (LlamaActs& a : acts_) {
      a.xn1.resize(N * C), a.rstd1.resize(N), a.q.resize(N * Q), a.k.resize(N * KV), a.v.resize(N * KV);
      if (an.qk_norm)
        a.q0.resize(N * Q), a.k0.resize(N * KV), a.rstdq.resize(N * c.n_heads), a.rstdk.resize(N * c.n_kv_heads);
      a.att.resize(size_t(B) * c.n_heads * T * T), a.atty.resize(N * Q), a.x1.resize(N * C);
      a.xn2.resize(N * C), a.rstd2.resize(N), a.h1.resize(N * H), a.h3.resize(N * H), a.hg.resize(N * H);
    }
    tmp_.resize(N * C);
    if (g_) {  // backward scratch, shared by all layers
      dx1_.resize(N * C), dxn_.resize(N * C), datty_.resize(N * Q), dq_.resize(N * Q), dk_.resize(N * KV);
      dv_.resize(N * KV), dh1_.resize(N * H), dh3_.resize(N * H), dhg_.resize(N * H);
      if (an.qk_norm) dq0_.resize(N * Q), dk0_.resize(N * KV);
    }
  }

  bool freeze_base(AdapterGradSink* sink) override {
    f_.sink = sink;
    return true;
  }

  const char* name() const override { return "cpu-llama"; }

  void forward_block(int l, const float* x, float* y, int B, int T) override {
    const ModelConfig& c = p_.config();
    const LayerParams& w = p_.layers[size_t(l)];
    LlamaActs& a = acts_[size_t(ckpt_.slot(l, c.n_layers))];
    const int N = B * T, C = c.dim, NH = c.n_heads, NKV = c.n_kv_heads, HS = c.head_dim(), Q = NH * HS, KV = NKV * HS,
              H = c.hidden_dim;
    // --- attention ---
    rmsnorm_forward(a.xn1.data(), a.rstd1.data(), x, w.attn_norm, N, C, c.norm_eps);
    const bool head_norms = w.q_norm != nullptr;  // Qwen3: project into q0, k0, normalise into q, k
    float* q = head_norms ? a.q0.data() : a.q.data();
    float* k = head_norms ? a.k0.data() : a.k.data();
    matmul_forward(q, a.xn1.data(), w.wq, w.bq, N, C, Q);  // biases null unless the family has them
    matmul_forward(k, a.xn1.data(), w.wk, w.bk, N, C, KV);
    matmul_forward(a.v.data(), a.xn1.data(), w.wv, w.bv, N, C, KV);
    if (head_norms) {  // every head of every token is one row of HS values
      rmsnorm_forward(a.q.data(), a.rstdq.data(), q, w.q_norm, N * NH, HS, c.norm_eps);
      rmsnorm_forward(a.k.data(), a.rstdk.data(), k, w.k_norm, N * NKV, HS, c.norm_eps);
    }
    rope_forward(a.q.data(), a.q.data(), B, T, NH, HS, inv_freq_.data());  // in place: positions 0..T−1
    rope_forward(a.k.data(), a.k.data(), B, T, NKV, HS, inv_freq_.data());
    attention_forward(a.atty.data(), a.att.data(), a.q.data(), a.k.data(), a.v.data(), B, T, NH, NKV, HS, c.sliding_window);
    matmul_forward(tmp_.data(), a.atty.data(), w.wo, (const float*)nullptr, N, Q, C);
    residual_forward(a.x1.data(), x, tmp_.data(), size_t(N) * C);
    // --- feed-forward (SwiGLU) ---
    rmsnorm_forward(a.xn2.data(), a.rstd2.data(), a.x1.data(), w.ffn_norm, N, C, c.norm_eps);
    matmul_forward(a.h1.data(), a.xn2.data(), w.w1, (const float*)nullptr, N, C, H);
    matmul_forward(a.h3.data(), a.xn2.data(), w.w3, (const float*)nullptr, N, C, H);
    swiglu_forward(a.hg.data(), a.h1.data(), a.h3.data(), size_t(N) * H);
    matmul_forward(tmp_.data(), a.hg.data(), w.w2, (const float*)nullptr, N, H, C);
    residual_forward(y, a.x1.data(), tmp_.data(), size_t(N) * C);
  }

  void backward_block(int l, const float* x, const float* dy, float* dx, int B, int T) override {
    ORION_CHECK(g_, "backward without gradient buffers");
    const ModelConfig& c = p_.config();
    const LayerParams& w = p_.layers[size_t(l)];
    LayerParams& dw = g_->layers[size_t(l)];
    LlamaActs& a = acts_[size_t(ckpt_.slot(l, c.n_layers))];
    const int N = B * T, C = c.dim, NH = c.n_heads, NKV = c.n_kv_heads, HS = c.head_dim(), H = c.hidden_dim;
    const size_t NC = size_t(N) * C, NH_ = size_t(N) * H;
    auto zero = [](std::vector<float>& v, size_t n) { std::fill_n(v.data(), n, 0.0f); };

    // --- feed-forward, in reverse ---
    // y = x1 + hg·w2ᵀ: dx1 gets dy directly (residual), the branch gets dy too.
    std::copy_n(dy, NC, dx1_.data());
    zero(dhg_, NH_);
    matmul_backward(dhg_.data(), f_.grad(dw.w2), (float*)nullptr, dy, a.hg.data(), w.w2, N, H, C);
    f_.report(l, LoraTarget::W2, a.hg.data(), dy, N);
    zero(dh1_, NH_), zero(dh3_, NH_);
    swiglu_backward(dh1_.data(), dh3_.data(), dhg_.data(), a.h1.data(), a.h3.data(), NH_);
    // xn2 fed both w1 and w3: its gradient is the sum of the two.
    zero(dxn_, NC);
    matmul_backward(dxn_.data(), f_.grad(dw.w1), (float*)nullptr, dh1_.data(), a.xn2.data(), w.w1, N, C, H);
    f_.report(l, LoraTarget::W1, a.xn2.data(), dh1_.data(), N);
    matmul_backward(dxn_.data(), f_.grad(dw.w3), (float*)nullptr, dh3_.data(), a.xn2.data(), w.w3, N, C, H);
    f_.report(l, LoraTarget::W3, a.xn2.data(), dh3_.data(), N);
    rmsnorm_backward(dx1_.data(), dw.ffn_norm, dxn_.data(), a.x1.data(), w.ffn_norm, a.rstd2.data(), N, C);

    // --- attention, in reverse (train/cpu/attention_half.h) ---
    // x1 = x + atty·woᵀ: dx gets dx1 past the branch.
    std::copy_n(dx1_.data(), NC, dx);
    const AttentionShape s{B, T, C, NH, NKV, HS};
    attention_output_backward(f_, l, w, dw, s, dx1_.data(), a.atty.data(), a.att.data(), a.q.data(), a.k.data(), a.v.data(),
                              datty_.data(), dq_.data(), dk_.data(), dv_.data());
    // The gradients reaching the rotated q, k turn back to the un-rotated projections.
    rope_backward(dq_.data(), dq_.data(), B, T, NH, HS, inv_freq_.data());
    rope_backward(dk_.data(), dk_.data(), B, T, NKV, HS, inv_freq_.data());
    const float *dq = dq_.data(), *dk = dk_.data();
    if (w.q_norm) {  // through the head norms (their gains' gradients too) to the projections' outputs
      const size_t NQ = size_t(N) * NH * HS, NK = size_t(N) * NKV * HS;
      zero(dq0_, NQ), zero(dk0_, NK);
      rmsnorm_backward(dq0_.data(), dw.q_norm, dq, a.q0.data(), w.q_norm, a.rstdq.data(), N * NH, HS);
      rmsnorm_backward(dk0_.data(), dw.k_norm, dk, a.k0.data(), w.k_norm, a.rstdk.data(), N * NKV, HS);
      dq = dq0_.data(), dk = dk0_.data();
    }
    qkv_projection_backward(f_, l, w, dw, s, a.xn1.data(), dq, dk, dv_.data(), dxn_.data());
    rmsnorm_backward(dx, dw.attn_norm, dxn_.data(), x, w.attn_norm, a.rstd1.data(), N, C);
  }

 private:
  const Params& p_;
  Grads* g_;
  FrozenBase f_;  // adapter training: no dW, the adapted projections reported
  std::vector<float> inv_freq_ = llama_rope_frequencies(p_.config());  // [HS/2] RoPE pair frequencies
  ActivationCheckpointing ckpt_;
  std::vector<LlamaActs> acts_;         // [ckpt_.slots(L)]
  std::vector<float> tmp_;              // [N, C] a branch's output before the residual add
  std::vector<float> dx1_, dxn_;        // [N, C]
  std::vector<float> datty_, dq_;       // [N, NH·HS]
  std::vector<float> dk_, dv_;          // [N, NKV·HS]
  std::vector<float> dh1_, dh3_, dhg_;  // [N, H]
  std::vector<float> dq0_, dk0_;        // [N, NH·HS], [N, NKV·HS] before the head norms (Qwen3)
};

}  // namespace

std::unique_ptr<BlockRunner> make_llama_cpu_blocks(const Params& params, Grads* grads, int B, int T,
                                                   const ActivationCheckpointing& ckpt) {
  return std::make_unique<LlamaCpuBlocks>(params, grads, B, T, ckpt);
}

}  // namespace orion::train
