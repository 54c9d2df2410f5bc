// One Llama block (llama2.c's "stories" models, and Llama-architecture Hugging Face models) for
// n tokens at positions pos .. pos+n−1; also the block of its relatives (llama_like.h).
//
//   x: [n, C] residual stream, updated in place
//   xb = rmsnorm(x) ⊙ attn_norm                                  [n, C]
//   q = xb·wqᵀ (+ bq) [n, NH·HS];  k = xb·wkᵀ (+ bk), v = xb·wvᵀ (+ bv) [n, NKV·HS] → the KV cache (after RoPE)
//   (Qwen3) q, k = rmsnorm of each head ⊙ q_norm, k_norm                  [HS per head]
//   RoPE rotates each (q, k) pair of channels (2i, 2i+1) by pos·freq_i, freq_i = theta^(−2i/HS)
//     (scaled for llama3 rope_scaling: llama_rope.cpp)
//   att = softmax(q·kᵀ/√HS, causal)·v, query head h reading kv head h/(NH/NKV)   [n, NH·HS]
//     (a sliding window: only the last sliding_window positions, the token's own included)
//   x += att·woᵀ
//   xb = rmsnorm(x) ⊙ ffn_norm
//   x += w2·(silu(w1·xb) ⊙ w3·xb)                                 (SwiGLU, hidden H)
// A LoRA adapter (lora) adds s·B·(A·in) right after each adapted projection, before RoPE / SwiGLU.
#include <vector>

#include "model/family/llama/llama.h"
#include "runtime/cpu/kernels.h"

namespace orion {

void llama_block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n, int pos,
                         KvCache& cache, int layer, const LoraLayerRef* lora) {
  const int C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS, KV = c.kv_dim(), H = c.hidden_dim;
  float* x = a.x.data();
  float* xb = a.xb.data();
  float* k = a.k.data();
  float* v = a.v.data();

  // --- attention ---
  auto bias = [](const Tensor& b) { return b.empty() ? nullptr : b.f32(); };
  cpu::rmsnorm(xb, x, l.attn_norm.f32(), n, C, c.norm_eps);
  cpu::matmul(a.q.data(), xb, l.wq.data, l.wq.dtype, bias(l.bq), n, C, Q);
  lora_add(lora, LoraTarget::Q, a.q.data(), xb, n, C, Q, a);  // + s·B·A·xb on an adapted projection (LoRA)
  cpu::matmul(k, xb, l.wk.data, l.wk.dtype, bias(l.bk), n, C, KV);
  lora_add(lora, LoraTarget::K, k, xb, n, C, KV, a);
  cpu::matmul(v, xb, l.wv.data, l.wv.dtype, bias(l.bv), n, C, KV);
  lora_add(lora, LoraTarget::V, v, xb, n, C, KV, a);
  if (!l.q_norm.empty()) {  // every head of every token is one row of HS values
    cpu::rmsnorm(a.q.data(), a.q.data(), l.q_norm.f32(), n * c.n_heads, HS, c.norm_eps);
    cpu::rmsnorm(k, k, l.k_norm.f32(), n * c.n_kv_heads, HS, c.norm_eps);
  }
  const std::vector<float> inv_freq = llama_rope_frequencies(c);
  std::vector<float> cs(static_cast<size_t>(HS));  // cos, sin of each pair's angle at one position
  for (int t = 0; t < n; t++) {
    cpu::rope_angles(cs.data(), inv_freq.data(), HS, pos + t);
    cpu::rope_rotate(a.q.data() + size_t(t) * Q, cs.data(), HS, 0, Q);
    cpu::rope_rotate(k + size_t(t) * KV, cs.data(), HS, 0, KV);
  }
  cache.store_rows(layer, pos, k, v, n);
  cpu::attention(a.att.data(), a.q.data(), cache.k(layer), cache.v(layer), n, pos, c.n_heads, c.n_kv_heads,
                 cache.layout(), c.sliding_window);
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
