// Frontends: functions that build the IR of one ANE kernel from a model's config and weights.
//
// Layout (DESIGN.md §2): every activation is [1, C, 1, S] — channels × sequence — in the kernel's
// element type (fp16 by default); linear layers are conv1x1 with weight constants [out, in, 1, 1]
// converted from the canonical [out, in] matrices; biases are a separate add of a [1, out, 1, 1]
// constant (C4); norms are reduce_mean / mul / pow(x, −0.5) (C17); attention is written out
// explicitly — reshape to heads [1, NH, HS, S], matmul with transpose flags, an additive causal mask
// constant, softmax, matmul — rather than the `attention` composite, because the hardware ignores
// masks in its own attention (C15) and the training kernels need the probabilities anyway; GELU and
// SiLU use the composites `gelu` / `silu`, which legalize-ane expands (C2). Programs with several
// results have several outputs, never a concat (C1). Output node names equal the output names.
//
// Dimension letters: C channels (dim), H FFN hidden, NH heads, NKV key/value heads, HS head size,
// Q = NH·HS, KV = NKV·HS, V vocabulary, S sequence (the bucket the kernel is compiled for; tokens
// occupy columns 0..n−1, padding columns may hold anything and never reach a real column, since
// attention is causal).
//
// The set (the original Orion's 13 + 2): GPT-2 inference 5, Llama training 6,
// classifier 2, LoRA 2. They live in the model layer because they read ModelWeights; they depend
// only on ir/ (and the model's own headers) below that.
#pragma once
#include "ir/graph.h"
#include "model/weights.h"

namespace orion::frontends {

struct KernelOptions {
  // Element type of the activations and constants. fp16 is what the ANE runs; fp32 builds the same
  // program at full precision (for the exact comparisons of the tests).
  ir::ElemType dtype = ir::ElemType::F16;
};

// ===== GPT-2 inference (model/family/gpt2/gpt2_kernels.cpp) =====================================================
// Prefill of a fresh sequence (positions 0..S−1), one layer:
//   in  x [1, C, 1, S]   residual stream
//   out y [1, C, 1, S] = x + Wo·attn(ln1(x)) + bo;  k, v [1, C, 1, S] for the KV cache
ir::Graph gpt2_prefill_attn(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
//   in  x [1, C, 1, S];  out y [1, C, 1, S] = x + W2·gelu(W1·ln2(x) + b1) + b2
ir::Graph gpt2_prefill_ffn(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
// Decode. The split: the ANE does the projections, the CPU attends over its KV cache.
// decode_qkv: in x [1, C, 1, S] (the new token in column 0, S the minimum bucket, the other
//   columns zero); out q, k, v [1, C, 1, S] = W·ln1(x) + b. The CPU appends k, v to its cache and
//   computes att = softmax(q·Kᵀ/√HS)·V over positions 0..pos.
// decode_ffn: in x [1, C, 1, S] (residual stream before the attention), att [1, C, 1, S];
//   out y [1, C, 1, S] = h + W2·gelu(W1·ln2(h) + b1) + b2 with h = x + Wo·att + bo.
ir::Graph gpt2_decode_qkv(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
ir::Graph gpt2_decode_ffn(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
// Final norm of either family (LayerNorm for GPT-2, RMSNorm for Llama):
//   in x [1, C, 1, S];  out y [1, C, 1, S]
ir::Graph final_norm(const ModelWeights& w, int S, KernelOptions opt = {});

// ===== Llama training, one layer (model/family/llama/llama_train_kernels.cpp) ========================
// Residual adds and every weight gradient (dW = dY·Xᵀ) stay on the CPU (DESIGN.md §3); these
// kernels compute the forward activations and the input gradients. RoPE uses positions 0..S−1.
// The Llama kernels serve Llama's relatives too (llama_like.h): fwd_attn adds q/k/v biases (Qwen2),
// normalises each head of q and k before RoPE (Qwen3), uses the config's head size, RoPE
// frequencies (llama3 scaling) and sliding window (Mistral).
// fwd_attn: in x [1, C, 1, S]; out
//   o [1, C, 1, S] = Wo·att (no residual)   q [1, Q, 1, S] (after RoPE)   k [1, KV, 1, S] (after RoPE)
//   v [1, KV, 1, S]   att [1, Q, 1, S] = softmax(qᵀk/√HS + mask)·v per head (before Wo)
//   xnorm [1, C, 1, S] = rmsnorm(x)·attn_norm
ir::Graph llama_fwd_attn(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
// decode_qkv (batched decode, infer/ane_batch_decode.cpp): in x [1, C, 1, S], one token per column;
//   out q [1, Q, 1, S], k, v [1, KV, 1, S]: fwd_attn's q, k, v before RoPE (the CPU rotates each to
//   its position) — position-wise, so the columns are independent rows.
ir::Graph llama_decode_qkv(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
// fwd_ffn: in x [1, C, 1, S]; out y [1, C, 1, S] = W2·gate (no residual), h1 = W1·xnorm,
//   h3 = W3·xnorm, gate = silu(h1)⊙h3 [1, H, 1, S], xnorm [1, C, 1, S]
ir::Graph llama_fwd_ffn(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
// ffn_bwd: in dy [1, C, 1, S] (gradient of fwd_ffn's y), x [1, C, 1, S] (fwd_ffn's input),
//   h1, h3 [1, H, 1, S]; out dx [1, C, 1, S] (through the norm; without the residual's dy),
//   dh1, dh3 [1, H, 1, S], dxnorm [1, C, 1, S]
ir::Graph llama_ffn_bwd(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
// sdpa_bwd1 (either family: no RoPE inside): in dy [1, C, 1, S] (gradient of fwd_attn's o), q [1, Q, 1, S], k, v [1, KV, 1, S];
//   out dv [1, KV, 1, S], probs (recomputed) and dprobs [1, NH·S, 1, S] — the per-head [S, S]
//   matrices with channel h·S + i holding query row i of head h (boundaries are [1, C, 1, S], C14)
ir::Graph sdpa_bwd1(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
// sdpa_bwd2 (no weights, either family): in probs, dprobs [1, NH·S, 1, S] (sdpa_bwd1's layout), q [1, Q, 1, S], k [1, KV, 1, S];
//   out dq [1, Q, 1, S], dk [1, KV, 1, S] (gradients of the post-RoPE q and k)
ir::Graph sdpa_bwd2(const ModelConfig& c, int S, KernelOptions opt = {});
// qkv_bwd: in dq [1, Q, 1, S], dk, dv [1, KV, 1, S], x [1, C, 1, S] (fwd_attn's input);
//   out dx [1, C, 1, S] (through the norm; without the residual), dxnorm [1, C, 1, S],
//   dq_lin [1, Q, 1, S], dk_lin [1, KV, 1, S] (gradients before RoPE, i.e. of Wq·xnorm, Wk·xnorm)
ir::Graph llama_qkv_bwd(const ModelWeights& w, int layer, int S, KernelOptions opt = {});

// ===== GPT-2 training, one layer (model/family/gpt2/gpt2_train_kernels.cpp) ======================================
// As the Llama set, with LayerNorm, biases and GELU (tanh form); no RoPE. The attention backward
// is sdpa_bwd1 / sdpa_bwd2, which serve either family.
// fwd_attn: in x [1, C, 1, S]; out o = Wo·att + bo [1, C, 1, S] (no residual), q, k, v [1, C, 1, S],
//   att [1, C, 1, S] (before Wo), xnorm = ln1(x) [1, C, 1, S]
ir::Graph gpt2_fwd_attn(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
// fwd_ffn: in x [1, C, 1, S]; out y = W2·gelu + b2 [1, C, 1, S] (no residual), fc = W1·xnorm + b1,
//   gelu = gelu(fc) [1, H, 1, S], xnorm = ln2(x) [1, C, 1, S]
ir::Graph gpt2_fwd_ffn(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
// ffn_bwd: in dy [1, C, 1, S], x [1, C, 1, S] (fwd_ffn's input), fc [1, H, 1, S];
//   out dx [1, C, 1, S] (through ln2; without the residual's dy), dfc [1, H, 1, S], dxnorm [1, C, 1, S]
ir::Graph gpt2_ffn_bwd(const ModelWeights& w, int layer, int S, KernelOptions opt = {});
// qkv_bwd: in dq, dk, dv [1, C, 1, S], x [1, C, 1, S] (fwd_attn's input);
//   out dx [1, C, 1, S] (through ln1; without the residual), dxnorm [1, C, 1, S]
ir::Graph gpt2_qkv_bwd(const ModelWeights& w, int layer, int S, KernelOptions opt = {});

// ===== Classifier (classifier_kernels.cpp) ====================================================
// in x [1, C, 1, S] (after the final norm); out logits [1, v_end − v_begin, 1, S] = rows
// [v_begin, v_end) of the classifier (v_end < 0: the real vocabulary). A convolution over more than
// ~32K channels is rejected by the ANE (C12, validate-ane refuses it): a 32000-token vocabulary
// stays on the CPU or is split into row ranges.
ir::Graph classifier_fwd(const ModelWeights& w, int S, int v_begin = 0, int v_end = -1, KernelOptions opt = {});
// in logits [1, V, 1, S]; out probs [1, V, 1, S] = softmax over the channels (vocabulary).
ir::Graph vocab_softmax(int V, int S, KernelOptions opt = {});

// ===== LoRA (lora_kernels.cpp): adapter matrices are graph INPUTS, so adapters switch without
// recompiling. scale = alpha / rank. =========================================================
// in x [1, in, 1, S], lora_a [1, r, 1, in] (A, row-major [r, in]), lora_b [1, out, 1, r] (B);
// out y [1, out, 1, S] = W·x + b + scale·B·(A·x). W [out, in] any dtype; bias may be empty.
ir::Graph lora_linear(const Tensor& W, const Tensor& bias, int rank, float alpha, int S, KernelOptions opt = {});
// The attention sublayer of either family with adapters on the q and v projections:
// in x [1, C, 1, S], lora_a_q [1, r, 1, C], lora_b_q [1, Q, 1, r], lora_a_v [1, r, 1, C],
//   lora_b_v [1, KV, 1, r];
// out y [1, C, 1, S] = x + Wo·attn(norm(x)) (+ bo), k, v [1, KV, 1, S] (k after RoPE for Llama).
// With B = 0 it computes exactly gpt2_prefill_attn (GPT-2) or x + llama_fwd_attn's o (Llama).
ir::Graph lora_attention(const ModelWeights& w, int layer, int S, int rank, float alpha, KernelOptions opt = {});

}  // namespace orion::frontends
