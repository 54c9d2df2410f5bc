// GPT-2 training kernels, one layer: the forward halves of a block and their input gradients, the
// GPT-2 counterparts of llama_train_kernels.cpp (the CPU adds the residuals and computes every
// weight and bias gradient from the saved activations). The attention backward is the family-free
// sdpa_bwd1 / sdpa_bwd2 pair: GPT-2 has no RoPE, and Wo's bias does not enter dx.
//
// Forward of one block (gpt2_block.cpp), positions 0..S−1:
//   xnorm = layernorm(x)⊙ln1_w + ln1_b;  q = Wq·xnorm + bq, k, v likewise
//   probs = softmax(qᵀk/√HS + mask);  att = v·probsᵀ;  o = Wo·att + bo        x ← x + o
//   xnorm2 = layernorm(x)⊙ln2_w + ln2_b;  fc = W1·xnorm2 + b1;  a = gelu(fc);
//   y = W2·a + b2                                                             x ← x + y
// Backward (d<name> is ∂loss/∂<name>):
//   ffn_bwd:  da = W2ᵀ·dy;  dfc = da⊙gelu'(fc);  dxnorm2 = W1ᵀ·dfc;  dx = layernorm_backward(dxnorm2)
//   sdpa_bwd1, sdpa_bwd2 (shared with Llama): dv, dq, dk from do
//   qkv_bwd:  dxnorm = Wqᵀ·dq + Wkᵀ·dk + Wvᵀ·dv;  dx = layernorm_backward(dxnorm)
// The biases add constants (C4: a separate add, never a conv bias) and drop out of every input
// gradient; their gradients are the CPU's column sums of dq, dk, dv, do, dfc, dy.
#include "base/error.h"
#include "model/frontends/frontends.h"
#include "model/frontends/kernel_builder.h"

namespace orion::frontends {

ir::Graph gpt2_fwd_attn(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "gpt2_fwd_attn", "gpt2");
  KernelBuilder b("gpt2_fwd_attn", opt.dtype);
  Value x = b.act("x", w.config.dim, S);  // [1, C, 1, S]
  AttentionParts p = attention_sublayer(b, w, layer, x);
  for (Value v : {p.o, p.q, p.k, p.v, p.att, p.xnorm}) b.output(v);
  return std::move(b.g);
}

ir::Graph gpt2_fwd_ffn(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "gpt2_fwd_ffn", "gpt2");
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  KernelBuilder b("gpt2_fwd_ffn", opt.dtype);
  Value x = b.act("x", c.dim, S);
  Value xn = b.layernorm(x, "ln2", l.ffn_norm, l.ffn_norm_b, c.norm_eps, "xnorm");  // [1, C, 1, S]
  Value fc = b.linear(xn, "w1", l.w1, l.b1, "fc");                                  // [1, H, 1, S]
  Value a = b.op(ir::Op::Gelu, {fc}, {}, "gelu");                                   // tanh form (C2)
  Value y = b.linear(a, "w2", l.w2, l.b2, "y");                                     // [1, C, 1, S]
  for (Value v : {y, fc, a, xn}) b.output(v);
  return std::move(b.g);
}

ir::Graph gpt2_ffn_bwd(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "gpt2_ffn_bwd", "gpt2");
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  KernelBuilder b("gpt2_ffn_bwd", opt.dtype);
  Value dy = b.act("dy", c.dim, S);
  Value x = b.act("x", c.dim, S);
  Value fc = b.act("fc", c.hidden_dim, S);
  // y = W2·a + b2  ⇒  da = W2ᵀ·dy;  a = gelu(fc)  ⇒  dfc = da⊙gelu'(fc)             [1, H, 1, S]
  Value da = b.linear_t(dy, "w2t", l.w2, "dgelu");
  Value dfc = b.gelu_backward(fc, da, "dfc");
  // fc = W1·xnorm + b1  ⇒  dxnorm = W1ᵀ·dfc                                            [1, C, 1, S]
  Value dxn = b.linear_t(dfc, "w1t", l.w1, "dxnorm");
  Value dx = b.layernorm_backward(x, dxn, "ln2", l.ffn_norm, c.norm_eps, "dx");
  for (Value v : {dx, dfc, dxn}) b.output(v);
  return std::move(b.g);
}

void gpt2_qkv_backward(KernelBuilder& b, const ModelWeights& w, int layer, int S, const QVAdapters* lora) {
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  Value dq = b.act("dq", c.dim, S), dk = b.act("dk", c.kv_dim(), S), dv = b.act("dv", c.kv_dim(), S);
  Value x = b.act("x", c.dim, S);
  // q = Wq·xnorm + bq, k, v likewise  ⇒  dxnorm = Wqᵀ·dq + Wkᵀ·dk + Wvᵀ·dv             [1, C, 1, S]
  Value dxv = b.linear_t(dv, "wvt", l.wv, "dxnorm_v"), dxk = b.linear_t(dk, "wkt", l.wk, "dxnorm_k");
  Value dxq = b.linear_t(dq, "wqt", l.wq, "dxnorm_q");
  if (lora) {  // q += s·B_q·(A_q·xnorm), v likewise  ⇒  dxnorm also gets s·A_qᵀ·(B_qᵀ·dq), s·A_vᵀ·(B_vᵀ·dv)
    Value dxq_lora = b.lora_delta_backward(dq, lora->a_q, lora->b_q, lora->scale, "dxnorm_q_lora");
    dxq = b.add(dxq, dxq_lora);
    Value dxv_lora = b.lora_delta_backward(dv, lora->a_v, lora->b_v, lora->scale, "dxnorm_v_lora");
    dxv = b.add(dxv, dxv_lora);
  }
  Value dxn = b.add(b.add(dxq, dxk), dxv, "dxnorm");
  Value dx = b.layernorm_backward(x, dxn, "ln1", l.attn_norm, c.norm_eps, "dx");
  for (Value v : {dx, dxn}) b.output(v);
}

ir::Graph gpt2_qkv_bwd(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "gpt2_qkv_bwd", "gpt2");
  KernelBuilder b("gpt2_qkv_bwd", opt.dtype);
  gpt2_qkv_backward(b, w, layer, S);
  return std::move(b.g);
}

}  // namespace orion::frontends
