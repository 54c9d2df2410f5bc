// One Llama block (llama2.c's "stories" models, and Llama-architecture Hugging Face models) for
// n tokens at positions pos .. pos+n−1.
//
//   x: [n, C] residual stream, updated in place
//   xb = rmsnorm(x) ⊙ attn_norm                                  [n, C]
//   q = xb·wqᵀ [n, NH·HS];  k = xb·wkᵀ, v = xb·wvᵀ [n, NKV·HS] → written into the KV cache
//   RoPE rotates each (q, k) pair of channels (2i, 2i+1) by pos·theta^(−2i/HS)
//   att = softmax(q·kᵀ/√HS, causal)·v, query head h reading kv head h/(NH/NKV)   [n, NH·HS]
//   x += att·woᵀ
//   xb = rmsnorm(x) ⊙ ffn_norm
//   x += w2·(silu(w1·xb) ⊙ w3·xb)                                 (SwiGLU, hidden H)
// A LoRA adapter (lora) adds s·B·(A·in) right after each adapted projection, before RoPE / SwiGLU.
#include "model/family/llama/llama.h"
#include "runtime/cpu/kernels.h"

namespace orion {

void llama_block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n, int pos,
                         float* k_cache, float* v_cache, const LoraLayerRef* lora) {
  const int C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS, KV = c.kv_dim(), H = c.hidden_dim;
  float* x = a.x.data();
  float* xb = a.xb.data();
  float* k = k_cache + size_t(pos) * KV;  // this chunk's rows of the cache
  float* v = v_cache + size_t(pos) * KV;

  // --- attention ---
  cpu::rmsnorm(xb, x, l.attn_norm.f32(), n, C, c.norm_eps);
  cpu::matmul(a.q.data(), xb, l.wq.data, l.wq.dtype, nullptr, n, C, Q);
  lora_add(lora, LoraTarget::Q, a.q.data(), xb, n, C, Q, a);  // + s·B·A·xb on an adapted projection (LoRA)
  cpu::matmul(k, xb, l.wk.data, l.wk.dtype, nullptr, n, C, KV);
  lora_add(lora, LoraTarget::K, k, xb, n, C, KV, a);
  cpu::matmul(v, xb, l.wv.data, l.wv.dtype, nullptr, n, C, KV);
  lora_add(lora, LoraTarget::V, v, xb, n, C, KV, a);
  for (int t = 0; t < n; t++) {
    cpu::rope(a.q.data() + size_t(t) * Q, c.n_heads, HS, pos + t, c.rope_theta);
    cpu::rope(k + size_t(t) * KV, c.n_kv_heads, HS, pos + t, c.rope_theta);
  }
  cpu::attention(a.att.data(), a.q.data(), k_cache, v_cache, n, pos, c.n_heads, c.n_kv_heads, HS, KV);
  cpu::matmul(xb, a.att.data(), l.wo.data, l.wo.dtype, nullptr, n, Q, C);
  lora_add(lora, LoraTarget::O, xb, a.att.data(), n, Q, C, a);
  cpu::add_inplace(x, xb, size_t(n) * C);

  // --- feed-forward (SwiGLU) ---
  cpu::rmsnorm(xb, x, l.ffn_norm.f32(), n, C, c.norm_eps);
  cpu::matmul(a.hb.data(), xb, l.w1.data, l.w1.dtype, nullptr, n, C, H);
  lora_add(lora, LoraTarget::W1, a.hb.data(), xb, n, C, H, a);
  cpu::matmul(a.hb2.data(), xb, l.w3.data, l.w3.dtype, nullptr, n, C, H);
  lora_add(lora, LoraTarget::W3, a.hb2.data(), xb, n, C, H, a);
  cpu::swiglu(a.hb.data(), a.hb.data(), a.hb2.data(), size_t(n) * H);
  cpu::matmul(xb, a.hb.data(), l.w2.data, l.w2.dtype, nullptr, n, H, C);
  lora_add(lora, LoraTarget::W2, xb, a.hb.data(), n, H, C, a);
  cpu::add_inplace(x, xb, size_t(n) * C);
}

}  // namespace orion
