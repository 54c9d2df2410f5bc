// A Llama ("stories") block trained through ANE programs: the Stories training kernels
// (llama_train_kernels.cpp) compute the forward and the input gradients, the CPU adds the
// residuals and computes every weight gradient. The math is llama_cpu_train.cpp's, split as follows
// for one sequence of T tokens (x [T, C] rows on the CPU, [1, C, 1, S] on the ANE):
//
//   ANE fwd_attn(x)      → o = Wo·att, q, k (after RoPE), v, att, xn1 = rmsnorm(x)⊙attn_norm
//   CPU x1 = x + o
//   ANE fwd_ffn(x1)      → f = W2·gate, h1, h3, gate = silu(h1)⊙h3, xn2
//   CPU y = x1 + f
// backward, from dy = ∂loss/∂y:
//   ANE ffn_bwd(dy, x1, h1, h3)          → dx_ffn (through the norm), dh1, dh3, dxn2
//   CPU dx1 = dy + dx_ffn                  (the residual passes dy straight to x1)
//   ANE sdpa_bwd1(dx1, q, k, v)          → dv, probs, dprobs   (dx1 is the gradient of o)
//   ANE sdpa_bwd2(probs, dprobs, q, k)   → dq, dk              (after RoPE)
//   ANE qkv_bwd(dq, dk, dv, x)           → dx_attn, dxn1, dq_lin, dk_lin (before RoPE)
//   CPU dx = dx1 + dx_attn
//   CPU, over all B·T rows at once (sgemm, accumulating into grads.layers[l]):
//       dW2 += dyᵀ·gate   dW1 += dh1ᵀ·xn2   dW3 += dh3ᵀ·xn2   dffn_norm from dxn2, x1
//       dWo += dx1ᵀ·att   dWq += dq_linᵀ·xn1   dWk += dk_linᵀ·xn1   dWv += dvᵀ·xn1   dattn_norm from dxn1, x
//
// Adapter training (make_lora_ane_blocks): the base is frozen, so it is baked into the
// programs once and never updated; fwd_attn and qkv_bwd are the LoRA variants (lora_frontends.h)
// with A and s·B of the q and v adapters as program inputs, rebuilt on the host after each step
// (no compile). No weight gradient is computed: the sink (the LoRA trainer) gets xn1 and dq_lin,
// dv — ANE outputs — and computes dA, dB on the CPU. The other kernels are the plain ones: an
// adapter on q or v changes no other kernel's math (the FFN, Wo and the attention backward).
// The same sink mechanism (freeze_base) serves the merged path: dW skipped, X and dY reported.
#include <algorithm>

#include "model/frontends/frontends.h"
#include "model/frontends/lora_frontends.h"
#include "train/ane/ane_blocks_impl.h"
#include "train/family/llama/llama_training.h"
#include "train/cpu/layers.h"

namespace orion::train::ane {
namespace {

// What one layer keeps from its forward: kernel outputs that feed a backward kernel stay in the
// programs' layout (one tensor per sequence); those that feed a weight gradient become rows.
struct LlamaSaved {
  std::vector<ir::Tensor32> q, k, v, h1, h3;   // [B] of [1, Q|KV|H, 1, S]
  std::vector<float> att, xn1, x1, gate, xn2;  // [N, Q], [N, C], [N, C], [N, H], [N, C]
};

class LlamaAneBlocks final : public AneBlocksBase {
 public:
  // lora: adapter training with the base baked (lora's targets ⊆ {q, v}; its gradients go to sink).
  LlamaAneBlocks(const Params& p, Grads* g, int B, int T, const AneTrainOptions& o, const LoraAdapter* lora = nullptr,
                 AdapterGradSink* sink = nullptr)
      : AneBlocksBase(p, g, B, T, o, lora ? lora->rank() : 0) {
    const ModelConfig& c = p.config();
    const size_t N = size_t(B) * T, C = c.dim, Q = size_t(c.n_heads) * c.head_dim(), KV = c.kv_dim(), H = c.hidden_dim;
    saved_.resize(size_t(c.n_layers));
    for (LlamaSaved& a : saved_) {
      a.q.resize(size_t(B)), a.k.resize(size_t(B)), a.v.resize(size_t(B)), a.h1.resize(size_t(B)), a.h3.resize(size_t(B));
      a.att.resize(N * Q), a.xn1.resize(N * C), a.x1.resize(N * C), a.gate.resize(N * H), a.xn2.resize(N * C);
    }
    if (g || sink)
      for (Scratch& d : scratch_) {
        d.dy.resize(N * C), d.dx1.resize(N * C), d.dxn1.resize(N * C), d.dxn2.resize(N * C);
        d.dq.resize(N * Q), d.dk.resize(N * KV), d.dv.resize(N * KV), d.dh1.resize(N * H), d.dh3.resize(N * H);
      }
    if (lora) use_adapter_inputs(*lora, sink);
  }

  ~LlamaAneBlocks() override { finish_jobs(); }

  const char* name() const override { return "ane-llama"; }

  void forward_block(int l, const float* x, float* y, int B, int T) override {
    ensure_compiled();
    const ModelConfig& c = p_.config();
    const int C = c.dim, Q = c.n_heads * c.head_dim(), H = c.hidden_dim;
    LlamaSaved& a = saved_[size_t(l)];
    for (int b = 0; b < B; b++) {
      const size_t r = size_t(b) * T;  // first row of sequence b
      float* x1 = a.x1.data() + r * C;
      attention_forward(l, x + r * C, T, a.q[size_t(b)], a.k[size_t(b)], a.v[size_t(b)], a.att.data() + r * Q,
                        a.xn1.data() + r * C, x1);

      TensorMap ff = run(kFwdFfn, l, {{"x", to_ane(x1, T, C, Sf_)}});
      a.h1[size_t(b)] = std::move(ff.at("h1")), a.h3[size_t(b)] = std::move(ff.at("h3"));
      from_ane(ff.at("gate"), T, a.gate.data() + r * H);
      from_ane(ff.at("xnorm"), T, a.xn2.data() + r * C);
      float* yb = y + r * C;
      std::copy_n(x1, size_t(T) * C, yb);  // y = x1 + W2·gate
      from_ane(ff.at("y"), T, yb, /*accumulate=*/true);
    }
  }

  void backward_block(int l, const float* x, const float* dy_in, float* dx, int B, int T) override {
    ORION_CHECK(g_ || f_.sink, "backward without gradient buffers");
    const ModelConfig& c = p_.config();
    LlamaSaved& a = saved_[size_t(l)];
    const int N = B * T, C = c.dim, Q = c.n_heads * c.head_dim(), KV = c.kv_dim(), H = c.hidden_dim;
    wait_for_scratch();
    Scratch& d = scratch_[size_t(l) % 2];
    // dy is the trainer's buffer, which the next layer down writes its dx into: the dW job reads a copy
    std::copy_n(dy_in, size_t(N) * C, d.dy.data());
    const float* dy = d.dy.data();
    const float gs = gradient_scale(dy, size_t(N) * C), unscale = 1.0f / gs;  // exact: a power of two
    for (int b = 0; b < B; b++) {
      const size_t r = size_t(b) * T;
      const float* dyb = dy + r * C;
      TensorMap fb = run(kFfnBwd, l,
                         {{"dy", to_ane(dyb, T, C, Sf_, gs)},
                          {"x", to_ane(a.x1.data() + r * C, T, C, Sf_)},
                          {"h1", a.h1[size_t(b)]},
                          {"h3", a.h3[size_t(b)]}});
      float* dx1 = d.dx1.data() + r * C;
      std::copy_n(dyb, size_t(T) * C, dx1);  // dx1 = dy + dx_ffn
      from_ane(fb.at("dx"), T, dx1, /*accumulate=*/true, unscale);
      sanitize(dx1, size_t(T) * C);  // fp16 overflow reads back as ±Inf/NaN: repaired and counted
      from_ane(fb.at("dh1"), T, d.dh1.data() + r * H, /*accumulate=*/false, unscale);
      from_ane(fb.at("dh3"), T, d.dh3.data() + r * H, /*accumulate=*/false, unscale);
      from_ane(fb.at("dxnorm"), T, d.dxn2.data() + r * C, /*accumulate=*/false, unscale);

      AttentionGrads ag = attention_backward(l, dx1, x + r * C, T, a.q[size_t(b)], a.k[size_t(b)], a.v[size_t(b)], gs);
      float* dxb = dx + r * C;
      std::copy_n(dx1, size_t(T) * C, dxb);  // dx = dx1 + dx_attn
      from_ane(ag.qkv.at("dx"), T, dxb, /*accumulate=*/true, unscale);
      from_ane(ag.sdpa1.at("dv"), T, d.dv.data() + r * KV, /*accumulate=*/false, unscale);
      from_ane(ag.qkv.at("dq_lin"), T, d.dq.data() + r * Q, /*accumulate=*/false, unscale);  // before RoPE: what Wq produced
      from_ane(ag.qkv.at("dk_lin"), T, d.dk.data() + r * KV, /*accumulate=*/false, unscale);
      from_ane(ag.qkv.at("dxnorm"), T, d.dxn1.data() + r * C, /*accumulate=*/false, unscale);
    }
    // The other gradients read back from fp16 programs, likewise.
    sanitize(dx, size_t(N) * C), sanitize(d.dxn1.data(), size_t(N) * C), sanitize(d.dxn2.data(), size_t(N) * C);
    sanitize(d.dh1.data(), size_t(N) * H), sanitize(d.dh3.data(), size_t(N) * H);
    sanitize(d.dq.data(), size_t(N) * Q), sanitize(d.dk.data(), size_t(N) * KV), sanitize(d.dv.data(), size_t(N) * KV);
    weight_gradients(l, /*may_overlap=*/!f_.sink, [this, l, x, N, &d] { layer_weight_gradients(l, x, N, d); });
  }

 private:
  // The gradients of one layer's backward that its weight gradients read ([N, ·] rows).
  struct Scratch {
    std::vector<float> dy, dx1, dxn1, dxn2;  // [N, C]
    std::vector<float> dq, dk, dv;           // [N, Q], [N, KV], [N, KV]
    std::vector<float> dh1, dh3;             // [N, H]
  };

  // The weight gradients dW = dYᵀ·X over all N rows (frozen base: only the adapters' from X, dY).
  void layer_weight_gradients(int l, const float* x, int N, const Scratch& d) {
    const ModelConfig& c = p_.config();
    const LayerParams& w = p_.layers[size_t(l)];
    LayerParams none;  // a frozen base has no gradient buffers (f_.grad gives nullptr for every dW)
    LayerParams& dw = g_ ? g_->layers[size_t(l)] : none;
    const LlamaSaved& a = saved_[size_t(l)];
    const int C = c.dim, Q = c.n_heads * c.head_dim(), KV = c.kv_dim(), H = c.hidden_dim;
    projection_weight_gradients(l,  // no biases in Llama
                                {
                                    {LoraTarget::W2, dw.w2, nullptr, d.dy.data(), a.gate.data(), w.w2, H, C},
                                    {LoraTarget::W1, dw.w1, nullptr, d.dh1.data(), a.xn2.data(), w.w1, C, H},
                                    {LoraTarget::W3, dw.w3, nullptr, d.dh3.data(), a.xn2.data(), w.w3, C, H},
                                    {LoraTarget::O, dw.wo, nullptr, d.dx1.data(), a.att.data(), w.wo, Q, C},
                                    {LoraTarget::Q, dw.wq, nullptr, d.dq.data(), a.xn1.data(), w.wq, C, Q},
                                    {LoraTarget::K, dw.wk, nullptr, d.dk.data(), a.xn1.data(), w.wk, C, KV},
                                    {LoraTarget::V, dw.wv, nullptr, d.dv.data(), a.xn1.data(), w.wv, C, KV},
                                },
                                N);
    if (!f_.sink) {
      rmsnorm_weight_grad(dw.ffn_norm, d.dxn2.data(), a.x1.data(), N, C, c.norm_eps);
      rmsnorm_weight_grad(dw.attn_norm, d.dxn1.data(), x, N, C, c.norm_eps);
    }
  }

  std::vector<LlamaSaved> saved_;
  Scratch scratch_[2];  // layer l uses set l % 2 (its dW job may still read it while layer l − 1 runs)
};

}  // namespace

std::unique_ptr<AneBlocks> make_llama_ane_blocks(const Params& p, Grads* g, int B, int T, const AneTrainOptions& o) {
  return std::make_unique<LlamaAneBlocks>(p, g, B, T, o);
}

std::unique_ptr<AneBlocks> make_llama_lora_ane_blocks(const Params& base, const LoraAdapter& a, AdapterGradSink& sink, int B,
                                                      int T, const AneTrainOptions& o) {
  return std::make_unique<LlamaAneBlocks>(base, nullptr, B, T, o, &a, &sink);
}

}  // namespace orion::train::ane
