// A GPT-2 block trained through ANE programs (gpt2_train_kernels.cpp + the shared attention
// backward), the CPU adding the residuals and computing every weight and bias gradient. The math
// is gpt2_cpu_train.cpp's, split for one sequence of T tokens:
//
//   ANE fwd_attn(x)      → o = Wo·att + bo, q, k, v, att, xn1 = ln1(x)
//   CPU x1 = x + o
//   ANE fwd_ffn(x1)      → f = W2·gelu + b2, fc = W1·xn2 + b1, gelu = gelu(fc), xn2 = ln2(x1)
//   CPU y = x1 + f
// backward, from dy:
//   ANE ffn_bwd(dy, x1, fc)              → dx_ffn (through ln2), dfc, dxn2
//   CPU dx1 = dy + dx_ffn
//   ANE sdpa_bwd1(dx1, q, k, v)          → dv, probs, dprobs
//   ANE sdpa_bwd2(probs, dprobs, q, k)   → dq, dk
//   ANE qkv_bwd(dq, dk, dv, x)           → dx_attn (through ln1), dxn1
//   CPU dx = dx1 + dx_attn
//   CPU over all B·T rows: dW2, db2 from dy and gelu;  dW1, db1 from dfc and xn2;  ln2 from dxn2, x1;
//       dWo, dbo from dx1 and att;  dWq, dbq from dq;  dWk, dbk from dk;  dWv, dbv from dv (with xn1);
//       ln1 from dxn1, x.   (A bias's gradient is the column sum of its output's gradient.)
//
// Adapter training (make_lora_ane_blocks), as the Llama runner's: the base is frozen and
// baked into the programs once; fwd_attn and qkv_bwd are gpt2_lora_fwd_attn / gpt2_lora_qkv_bwd
// (lora_frontends.h) with A and s·B of the q and v adapters as program inputs, rebuilt on the host
// after each step (no compile); no weight or bias gradient is computed, and the sink gets xn1 (the
// projections' input) with dq, dv (their output gradients, sdpa_bwd2's and sdpa_bwd1's outputs —
// GPT-2 has no RoPE) to form dA, dB on the CPU. The other four kernels are the plain ones.
#include <algorithm>

#include "model/frontends/frontends.h"
#include "model/frontends/lora_frontends.h"
#include "train/ane/ane_blocks_impl.h"
#include "train/family/gpt2/gpt2_training.h"
#include "train/cpu/layers.h"

namespace orion::train::ane {
namespace {

// As LlamaSaved: program-layout tensors for the backward kernels, rows for the weight gradients.
struct Gpt2Saved {
  std::vector<ir::Tensor32> q, k, v, fc;       // [B] of [1, C|H, 1, S]
  std::vector<float> att, xn1, x1, gelu, xn2;  // [N, C], [N, C], [N, C], [N, H], [N, C]
};

class Gpt2AneBlocks final : public AneBlocksBase {
 public:
  // lora: adapter training with the base baked (lora's targets ⊆ {q, v}; its gradients go to sink).
  Gpt2AneBlocks(const Params& p, Grads* g, int B, int T, const AneTrainOptions& o, const LoraAdapter* lora = nullptr,
                AdapterGradSink* sink = nullptr)
      : AneBlocksBase(p, g, B, T, o, lora ? lora->rank() : 0) {
    const ModelConfig& c = p.config();
    const size_t N = size_t(B) * T, C = c.dim, H = c.hidden_dim;
    saved_.resize(size_t(c.n_layers));
    for (Gpt2Saved& a : saved_) {
      a.q.resize(size_t(B)), a.k.resize(size_t(B)), a.v.resize(size_t(B)), a.fc.resize(size_t(B));
      a.att.resize(N * C), a.xn1.resize(N * C), a.x1.resize(N * C), a.gelu.resize(N * H), a.xn2.resize(N * C);
    }
    if (g || sink) {
      for (Scratch& d : scratch_) {
        d.dy.resize(N * C), d.dx1.resize(N * C), d.dxn1.resize(N * C), d.dxn2.resize(N * C);
        d.dq.resize(N * C), d.dk.resize(N * C), d.dv.resize(N * C), d.dfc.resize(N * H);
      }
    }
    if (lora) use_adapter_inputs(*lora, sink);
  }

  ~Gpt2AneBlocks() override { finish_jobs(); }

  const char* name() const override { return "ane-gpt2"; }

  void forward_block(int l, const float* x, float* y, int B, int T) override {
    ensure_compiled();
    const ModelConfig& c = p_.config();
    const int C = c.dim, H = c.hidden_dim;
    Gpt2Saved& a = saved_[size_t(l)];
    for (int b = 0; b < B; b++) {
      const size_t r = size_t(b) * T;
      float* x1 = a.x1.data() + r * C;
      attention_forward(l, x + r * C, T, a.q[size_t(b)], a.k[size_t(b)], a.v[size_t(b)], a.att.data() + r * C,
                        a.xn1.data() + r * C, x1);

      TensorMap ff = run(kFwdFfn, l, {{"x", to_ane(x1, T, C, Sf_)}});
      a.fc[size_t(b)] = std::move(ff.at("fc"));
      from_ane(ff.at("gelu"), T, a.gelu.data() + r * H);
      from_ane(ff.at("xnorm"), T, a.xn2.data() + r * C);
      float* yb = y + r * C;
      std::copy_n(x1, size_t(T) * C, yb);  // y = x1 + W2·gelu + b2
      from_ane(ff.at("y"), T, yb, /*accumulate=*/true);
    }
  }

  void backward_block(int l, const float* x, const float* dy_in, float* dx, int B, int T) override {
    ORION_CHECK(g_ || f_.sink, "backward without gradient buffers");
    const ModelConfig& c = p_.config();
    Gpt2Saved& a = saved_[size_t(l)];
    const int N = B * T, C = c.dim, H = c.hidden_dim;
    wait_for_scratch();
    Scratch& d = scratch_[size_t(l) % 2];
    // dy is the trainer's buffer, which the next layer down writes its dx into: the dW job reads a copy
    std::copy_n(dy_in, size_t(N) * C, d.dy.data());
    const float* dy = d.dy.data();
    const float gs = gradient_scale(dy, size_t(N) * C), unscale = 1.0f / gs;  // exact: a power of two
    for (int b = 0; b < B; b++) {
      const size_t r = size_t(b) * T;
      const float* dyb = dy + r * C;
      TensorMap fb =
          run(kFfnBwd, l,
              {{"dy", to_ane(dyb, T, C, Sf_, gs)}, {"x", to_ane(a.x1.data() + r * C, T, C, Sf_)}, {"fc", a.fc[size_t(b)]}});
      float* dx1 = d.dx1.data() + r * C;
      std::copy_n(dyb, size_t(T) * C, dx1);  // dx1 = dy + dx_ffn
      from_ane(fb.at("dx"), T, dx1, /*accumulate=*/true, unscale);
      sanitize(dx1, size_t(T) * C);
      from_ane(fb.at("dfc"), T, d.dfc.data() + r * H, /*accumulate=*/false, unscale);
      from_ane(fb.at("dxnorm"), T, d.dxn2.data() + r * C, /*accumulate=*/false, unscale);

      AttentionGrads ag = attention_backward(l, dx1, x + r * C, T, a.q[size_t(b)], a.k[size_t(b)], a.v[size_t(b)], gs);
      float* dxb = dx + r * C;
      std::copy_n(dx1, size_t(T) * C, dxb);  // dx = dx1 + dx_attn
      from_ane(ag.qkv.at("dx"), T, dxb, /*accumulate=*/true, unscale);
      from_ane(ag.sdpa2.at("dq"), T, d.dq.data() + r * C, /*accumulate=*/false,
               unscale);  // no RoPE: the gradients of Wq·xn1 + bq, ...
      from_ane(ag.sdpa2.at("dk"), T, d.dk.data() + r * C, /*accumulate=*/false, unscale);
      from_ane(ag.sdpa1.at("dv"), T, d.dv.data() + r * C, /*accumulate=*/false, unscale);
      from_ane(ag.qkv.at("dxnorm"), T, d.dxn1.data() + r * C, /*accumulate=*/false, unscale);
    }
    sanitize(dx, size_t(N) * C), sanitize(d.dxn1.data(), size_t(N) * C), sanitize(d.dxn2.data(), size_t(N) * C);
    sanitize(d.dfc.data(), size_t(N) * H);
    sanitize(d.dq.data(), size_t(N) * C), sanitize(d.dk.data(), size_t(N) * C), sanitize(d.dv.data(), size_t(N) * C);
    weight_gradients(l, /*may_overlap=*/!f_.sink, [this, l, x, N, &d] { layer_weight_gradients(l, x, N, d); });
  }

 private:
  // The gradients of one layer's backward that its weight gradients read ([N, ·] rows).
  struct Scratch {
    std::vector<float> dy, dx1, dxn1, dxn2, dq, dk, dv;  // [N, C]
    std::vector<float> dfc;                              // [N, H]
  };

  // Weight and bias gradients over all N rows (frozen base: only the adapters' from X, dY).
  void layer_weight_gradients(int l, const float* x, int N, const Scratch& d) {
    const ModelConfig& c = p_.config();
    const LayerParams& w = p_.layers[size_t(l)];
    LayerParams none;  // a frozen base has no gradient buffers (f_.grad gives nullptr for every dW, db)
    LayerParams& dw = g_ ? g_->layers[size_t(l)] : none;
    const Gpt2Saved& a = saved_[size_t(l)];
    const int C = c.dim, H = c.hidden_dim;
    projection_weight_gradients(l,
                                {
                                    {LoraTarget::W2, dw.w2, dw.b2, d.dy.data(), a.gelu.data(), w.w2, H, C},
                                    {LoraTarget::W1, dw.w1, dw.b1, d.dfc.data(), a.xn2.data(), w.w1, C, H},
                                    {LoraTarget::O, dw.wo, dw.bo, d.dx1.data(), a.att.data(), w.wo, C, C},
                                    {LoraTarget::Q, dw.wq, dw.bq, d.dq.data(), a.xn1.data(), w.wq, C, C},
                                    {LoraTarget::K, dw.wk, dw.bk, d.dk.data(), a.xn1.data(), w.wk, C, C},
                                    {LoraTarget::V, dw.wv, dw.bv, d.dv.data(), a.xn1.data(), w.wv, C, C},
                                },
                                N);
    if (!f_.sink) layernorm_weight_grad(dw.ffn_norm, dw.ffn_norm_b, d.dxn2.data(), a.x1.data(), N, C, c.norm_eps);
    if (!f_.sink) layernorm_weight_grad(dw.attn_norm, dw.attn_norm_b, d.dxn1.data(), x, N, C, c.norm_eps);
  }

  std::vector<Gpt2Saved> saved_;
  Scratch scratch_[2];  // layer l uses set l % 2 (its dW job may still read it while layer l − 1 runs)
};

}  // namespace

std::unique_ptr<AneBlocks> make_gpt2_ane_blocks(const Params& p, Grads* g, int B, int T, const AneTrainOptions& o) {
  return std::make_unique<Gpt2AneBlocks>(p, g, B, T, o);
}

std::unique_ptr<AneBlocks> make_gpt2_lora_ane_blocks(const Params& base, const LoraAdapter& a, AdapterGradSink& sink, int B,
                                                     int T, const AneTrainOptions& o) {
  return std::make_unique<Gpt2AneBlocks>(base, nullptr, B, T, o, &a, &sink);
}

}  // namespace orion::train::ane
