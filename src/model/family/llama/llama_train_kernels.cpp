// Llama training kernels, one layer: the forward halves of a block and the input
// gradients of each, as DESIGN.md §3 splits a training step (the CPU adds the residuals, computes
// every weight gradient dW = dY·Xᵀ from the saved activations, and runs AdamW).
//
// Forward of one block (llama_block.cpp), positions 0..S−1:
//   xnorm = rmsnorm(x)⊙attn_norm;  q = rope(Wq·xnorm), k = rope(Wk·xnorm), v = Wv·xnorm
//   probs = softmax(qᵀk/√HS + mask);  att = v·probsᵀ;  o = Wo·att          x ← x + o
//   xnorm2 = rmsnorm(x)⊙ffn_norm;  h1 = W1·xnorm2, h3 = W3·xnorm2;  gate = silu(h1)⊙h3;
//   y = W2·gate                                                            x ← x + y
// Backward, walking the forward in reverse (d<name> is ∂loss/∂<name>):
//   ffn_bwd:   dgate = W2ᵀ·dy;  dh3 = dgate⊙silu(h1);  dh1 = dgate⊙h3⊙silu'(h1);
//              dxnorm2 = W1ᵀ·dh1 + W3ᵀ·dh3;  dx = rmsnorm_backward(dxnorm2)
//   sdpa_bwd1: datt = Woᵀ·do;  dv = datt·probs;  dprobs = dattᵀ·v         (probs recomputed)
//   sdpa_bwd2: dscores = probs⊙(dprobs − Σ_j probs⊙dprobs)/√HS;  dq = k·dscoresᵀ;  dk = q·dscores
//   qkv_bwd:   dq_lin = rope⁻¹(dq), dk_lin = rope⁻¹(dk);
//              dxnorm = Wqᵀ·dq_lin + Wkᵀ·dk_lin + Wvᵀ·dv;  dx = rmsnorm_backward(dxnorm)
// In the [1, NH, HS, S] head layout a "row vector per position" is a column, so q·kᵀ per head is
// matmul(q4, k4, transpose_x) and so on; the comments give each product's index form.
#include <cmath>

#include "base/error.h"
#include "model/family/llama/llama.h"
#include "model/frontends/frontends.h"
#include "model/frontends/kernel_builder.h"

namespace orion::frontends {

ir::Graph llama_fwd_attn(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "llama_fwd_attn", "llama");
  KernelBuilder b("llama_fwd_attn", opt.dtype);
  Value x = b.act("x", w.config.dim, S);  // [1, C, 1, S]
  AttentionParts p = attention_sublayer(b, w, layer, x);
  for (Value v : {p.o, p.q, p.k, p.v, p.att, p.xnorm}) b.output(v);
  return std::move(b.g);
}

ir::Graph llama_decode_qkv(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "llama_decode_qkv", "llama");
  KernelBuilder b("llama_decode_qkv", opt.dtype);
  Value x = b.act("x", w.config.dim, S);  // [1, C, 1, S]: one token per column
  // fwd_attn's own projection nodes without its RoPE (the identity at position 0, where a lone
  // decode token sits in fwd_attn) and without its attention, which mixes the columns.
  const QkvParts p = qkv_projections(b, w, layer, x, nullptr, /*rope=*/false);
  for (Value v : {p.q, p.k, p.v}) b.output(v);
  return std::move(b.g);
}

ir::Graph llama_fwd_ffn(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "llama_fwd_ffn", "llama");
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  KernelBuilder b("llama_fwd_ffn", opt.dtype);
  Value x = b.act("x", c.dim, S);
  Value xn = b.rmsnorm(x, "ffn_norm", l.ffn_norm, c.norm_eps, "xnorm");     // [1, C, 1, S]
  Value h1 = b.linear(xn, "w1", l.w1, {}, "h1");                            // gate branch [1, H, 1, S]
  Value h3 = b.linear(xn, "w3", l.w3, {}, "h3");                            // up branch   [1, H, 1, S]
  Value gate = b.mul(b.op(ir::Op::Silu, {h1}, {}, "h1_silu"), h3, "gate");  // silu(h1)⊙h3 (SwiGLU)
  Value y = b.linear(gate, "w2", l.w2, {}, "y");                            // [1, C, 1, S]
  for (Value v : {y, h1, h3, gate, xn}) b.output(v);
  return std::move(b.g);
}

ir::Graph llama_ffn_bwd(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "llama_ffn_bwd", "llama");
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  KernelBuilder b("llama_ffn_bwd", opt.dtype);
  Value dy = b.act("dy", c.dim, S);
  Value x = b.act("x", c.dim, S);
  Value h1 = b.act("h1", c.hidden_dim, S);
  Value h3 = b.act("h3", c.hidden_dim, S);
  // y = W2·gate  ⇒  dgate = W2ᵀ·dy                                                 [1, H, 1, S]
  Value dgate = b.linear_t(dy, "w2t", l.w2, "dgate");
  // gate = silu(h1)⊙h3 with silu(h) = h·σ(h) and silu'(h) = σ(h)·(1 + h·(1 − σ(h)))
  Value sig = b.op(ir::Op::Sigmoid, {h1}, {}, "h1_sigmoid");
  Value dh3 = b.mul(dgate, b.mul(h1, sig), "dh3");
  Value one = b.scalar(1.0, "one");
  Value dsilu = b.mul(sig, b.add(one, b.mul(h1, b.sub(one, sig))), "silu_grad");
  Value dh1 = b.mul(b.mul(dgate, h3), dsilu, "dh1");
  // h1 = W1·xnorm, h3 = W3·xnorm  ⇒  dxnorm = W1ᵀ·dh1 + W3ᵀ·dh3                       [1, C, 1, S]
  Value dx3 = b.linear_t(dh3, "w3t", l.w3, "dxnorm_3"), dx1 = b.linear_t(dh1, "w1t", l.w1, "dxnorm_1");
  Value dxn = b.add(dx1, dx3, "dxnorm");
  Value dx = b.rmsnorm_backward(x, dxn, "ffn_norm", l.ffn_norm, c.norm_eps, "dx");
  for (Value v : {dx, dh1, dh3, dxn}) b.output(v);
  return std::move(b.g);
}

ir::Graph sdpa_bwd1(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "sdpa_bwd1", nullptr);  // either family (no RoPE here)
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  const int64_t NH = c.n_heads, NKV = c.n_kv_heads, HS = c.head_dim(), G = NH / NKV;
  KernelBuilder b("sdpa_bwd1", opt.dtype);
  Value dy = b.act("dy", c.dim, S);  // gradient of o
  Value q = b.act("q", NH * HS, S), k = b.act("k", c.kv_dim(), S), v = b.act("v", c.kv_dim(), S);
  Value k4 = b.repeat_kv(b.heads(k, NKV, HS), G), v4 = b.repeat_kv(b.heads(v, NKV, HS), G);  // [1, NH, HS, S]
  // The forward's probabilities, recomputed from q and k                          [1, NH, S, S]
  Value probs = b.attention_probs(b.heads(q, NH, HS), k4, 1.0 / std::sqrt(double(HS)), "probs_heads");
  // o = Wo·att  ⇒  datt = Woᵀ·do                                                    [1, Q, 1, S]
  Value datt4 = b.heads(b.linear_t(dy, "wot", l.wo, "datt"), NH, HS);
  // att[d, i] = Σ_j v[d, j]·probs[i, j]  ⇒  dv[d, j] = Σ_i datt[d, i]·probs[i, j]
  //                                        dprobs[i, j] = Σ_d datt[d, i]·v[d, j]
  Value dv4 = b.matmul(datt4, probs, false, false, "dv_heads");  // [1, NH, HS, S]
  Value dv = b.merge_heads(b.sum_kv_groups(dv4, G), "dv");       // [1, KV, 1, S]
  Value dprobs = b.matmul(datt4, v4, /*tx=*/true, false, "dprobs_heads");
  // At the program boundary every tensor is [1, C, 1, S] (C14): [1, NH, S, S] → [1, NH·S, 1, S]
  // (channel h·S + i holds query row i of head h; the memory order is unchanged).
  b.output(dv);
  b.output(b.reshape(probs, {1, NH * S, 1, S}, "probs"));
  b.output(b.reshape(dprobs, {1, NH * S, 1, S}, "dprobs"));
  return std::move(b.g);
}

ir::Graph sdpa_bwd2(const ModelConfig& c, int S, KernelOptions opt) {
  if (S < 1) throw_usage_error(fmt::format("kernel sdpa_bwd2: sequence length {} must be at least 1", S), "seq");
  const int64_t NH = c.n_heads, NKV = c.n_kv_heads, HS = c.head_dim(), G = NH / NKV;
  KernelBuilder b("sdpa_bwd2", opt.dtype);
  // probs, dprobs arrive as [1, NH·S, 1, S] (sdpa_bwd1's outputs) and are viewed as [1, NH, S, S].
  Value probs = b.reshape(b.act("probs", NH * S, S), {1, NH, S, S});
  Value dprobs = b.reshape(b.act("dprobs", NH * S, S), {1, NH, S, S});
  Value q = b.act("q", NH * HS, S), k = b.act("k", c.kv_dim(), S);
  // Softmax backward along the keys: dscores = probs⊙(dprobs − Σ_j probs⊙dprobs); the scores
  // were scale·qᵀk + mask, so the gradient of qᵀk is scale·dscores (the mask is a constant).
  Value row = b.reduce(ir::Op::ReduceSum, b.mul(probs, dprobs), {3}, "probs_dot");  // [1, NH, S, 1]
  Value dscores = b.mul(probs, b.sub(dprobs, row), "dscores");
  Value dqk = b.mul(dscores, b.scalar(1.0 / std::sqrt(double(HS)), "attn_scale"));
  // scores[i, j] = Σ_d q[d, i]·k[d, j]  ⇒  dq[d, i] = Σ_j k[d, j]·dqk[i, j],  dk[d, j] = Σ_i q[d, i]·dqk[i, j]
  Value k4 = b.repeat_kv(b.heads(k, NKV, HS), G);
  Value dq = b.merge_heads(b.matmul(k4, dqk, false, /*ty=*/true, "dq_heads"), "dq");  // [1, Q, 1, S]
  Value dk4 = b.matmul(b.heads(q, NH, HS), dqk, false, false, "dk_heads");            // [1, NH, HS, S]
  Value dk = b.merge_heads(b.sum_kv_groups(dk4, G), "dk");                            // [1, KV, 1, S]
  b.output(dq);
  b.output(dk);
  return std::move(b.g);
}

void llama_qkv_backward(KernelBuilder& b, const ModelWeights& w, int layer, int S, const QVAdapters* lora) {
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  const int64_t NH = c.n_heads, NKV = c.n_kv_heads, HS = c.head_dim();
  Value dq = b.act("dq", NH * HS, S), dk = b.act("dk", c.kv_dim(), S), dv = b.act("dv", c.kv_dim(), S);
  Value x = b.act("x", c.dim, S);
  // q = rope(q_lin) is a rotation per pair, so dq_lin is dq rotated back (the transpose).
  const std::vector<float> inv_freq = llama_rope_frequencies(c);
  Value dq_lin = b.rope(dq, NH, HS, inv_freq, /*inverse=*/true, "dq_lin");
  Value dk_lin = b.rope(dk, NKV, HS, inv_freq, /*inverse=*/true, "dk_lin");
  // q_lin = Wq·xnorm, k_lin = Wk·xnorm, v = Wv·xnorm  ⇒  dxnorm = Wqᵀ·dq_lin + Wkᵀ·dk_lin + Wvᵀ·dv
  Value dxv = b.linear_t(dv, "wvt", l.wv, "dxnorm_v"), dxk = b.linear_t(dk_lin, "wkt", l.wk, "dxnorm_k");
  Value dxq = b.linear_t(dq_lin, "wqt", l.wq, "dxnorm_q");
  if (lora) {  // q_lin += s·B_q·(A_q·xnorm), v likewise  ⇒  dxnorm also gets s·A_qᵀ·(B_qᵀ·dq_lin), s·A_vᵀ·(B_vᵀ·dv)
    dxq = b.add(dxq, b.lora_delta_backward(dq_lin, lora->a_q, lora->b_q, lora->scale, "dxnorm_q_lora"));
    dxv = b.add(dxv, b.lora_delta_backward(dv, lora->a_v, lora->b_v, lora->scale, "dxnorm_v_lora"));
  }
  Value dxn = b.add(b.add(dxq, dxk), dxv, "dxnorm");
  Value dx = b.rmsnorm_backward(x, dxn, "attn_norm", l.attn_norm, c.norm_eps, "dx");
  for (Value v : {dx, dxn, dq_lin, dk_lin}) b.output(v);
}

ir::Graph llama_qkv_bwd(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "llama_qkv_bwd", "llama");
  KernelBuilder b("llama_qkv_bwd", opt.dtype);
  llama_qkv_backward(b, w, layer, S);
  return std::move(b.g);
}

}  // namespace orion::frontends
