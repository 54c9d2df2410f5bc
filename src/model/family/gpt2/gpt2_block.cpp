// One GPT-2 block for n tokens at positions pos .. pos+n−1 (pre-norm, as GPT-2 / llm.c).
//
//   x: [n, C] residual stream, updated in place
//   xb = layernorm(x) ⊙ ln1_w + ln1_b                          [n, C]
//   q = xb·wqᵀ + bq, k = xb·wkᵀ + bk, v = xb·wvᵀ + bv           [n, C] (k, v into the KV cache)
//   att = softmax(q·kᵀ/√HS, causal)·v per head                 [n, C]   (no RoPE: positions are
//                                                                        learned, added at the input)
//   x += att·woᵀ + bo
//   xb = layernorm(x) ⊙ ln2_w + ln2_b
//   x += w2·gelu(w1·xb + b1) + b2        (hidden H = 4C; GELU in its tanh form)
// A LoRA adapter (lora) adds s·B·(A·in) right after each adapted projection (bias included).
#include "model/family/gpt2/gpt2.h"
#include "runtime/cpu/kernels.h"

namespace orion {

void gpt2_block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n, int pos,
                        KvCache& cache, int layer, const LoraLayerRef* lora) {
  const int C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS, KV = c.kv_dim(), H = c.hidden_dim;
  float* x = a.x.data();
  float* xb = a.xb.data();
  float* k = a.k.data();
  float* v = a.v.data();

  // --- attention ---
  cpu::layernorm(xb, x, l.attn_norm.f32(), l.attn_norm_b.f32(), n, C, c.norm_eps);
  cpu::matmul(a.q.data(), xb, l.wq.data, l.wq.dtype, l.bq.f32(), n, C, Q);
  lora_add(lora, LoraTarget::Q, a.q.data(), xb, n, C, Q, a);  // + s·B·A·xb on an adapted projection (LoRA)
  cpu::matmul(k, xb, l.wk.data, l.wk.dtype, l.bk.f32(), n, C, KV);
  lora_add(lora, LoraTarget::K, k, xb, n, C, KV, a);
  cpu::matmul(v, xb, l.wv.data, l.wv.dtype, l.bv.f32(), n, C, KV);
  lora_add(lora, LoraTarget::V, v, xb, n, C, KV, a);
  cache.store_rows(layer, pos, k, v, n);
  cpu::attention(a.att.data(), a.q.data(), cache.k(layer), cache.v(layer), n, pos, c.n_heads, c.n_kv_heads,
                 cache.layout());
  cpu::matmul(xb, a.att.data(), l.wo.data, l.wo.dtype, l.bo.f32(), n, Q, C);
  lora_add(lora, LoraTarget::O, xb, a.att.data(), n, Q, C, a);
  cpu::add_inplace(x, xb, size_t(n) * C);

  // --- feed-forward (GELU) ---
  cpu::layernorm(xb, x, l.ffn_norm.f32(), l.ffn_norm_b.f32(), n, C, c.norm_eps);
  cpu::matmul(a.hb.data(), xb, l.w1.data, l.w1.dtype, l.b1.f32(), n, C, H);
  lora_add(lora, LoraTarget::W1, a.hb.data(), xb, n, C, H, a);
  cpu::gelu_tanh_inplace(a.hb.data(), size_t(n) * H);
  cpu::matmul(xb, a.hb.data(), l.w2.data, l.w2.dtype, l.b2.f32(), n, H, C);
  lora_add(lora, LoraTarget::W2, xb, a.hb.data(), n, H, C, a);
  cpu::add_inplace(x, xb, size_t(n) * C);
}

}  // namespace orion
