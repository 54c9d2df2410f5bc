// The pieces every frontend is built from (internal to src/model/frontends/).
//
// A KernelBuilder wraps one ir::Graph and one element type and knows how the transformer's
// operations are written in the ANE layout x [1, C, 1, S]: linear = conv1x1 (+ add bias),
// norms from reductions, RoPE on interleaved channel pairs, explicit causal attention, and the
// backward of the norm. attention_sublayer() is the attention half of a block of either family,
// shared by the GPT-2, Llama and LoRA kernels so that they compute the same math by construction.
//
// A rule for everything written with it: a call may have at most one argument that creates nodes;
// otherwise name the values in statements of their own. C++ leaves the order in which a call's
// arguments are evaluated unspecified (GCC goes right to left, clang left to right), and that
// order decides the order and the generated names of the nodes — the MIL text would depend on the
// compiler that built Orion (MilGoldenFrontends.EveryKernelGraphMatchesItsGolden checks it).
#pragma once
#include <map>
#include <string>

#include "ir/graph.h"
#include "model/weights.h"

namespace orion::frontends {

using ir::Value;

class KernelBuilder {
 public:
  KernelBuilder(std::string name, ir::ElemType dt) : g(std::move(name)), dt(dt) {}
  ir::Graph g;
  ir::ElemType dt;

  // --- values ---
  Value input(const std::string& name, std::vector<int64_t> shape) { return g.input(name, {dt, std::move(shape)}); }
  Value act(const std::string& name, int64_t C, int64_t S) { return input(name, {1, C, 1, S}); }  // [1, C, 1, S]
  Value scalar(double v, const std::string& name);  // one node per distinct value (C16: fewer constants)
  Value constant(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values) {
    return g.constant_f32(name, std::move(shape), values, dt);
  }
  // W [out, in] (any dtype) → const [out, in, 1, 1]; transposed: Wᵀ → const [in, out, 1, 1].
  Value weight(const std::string& name, const Tensor& W, bool transposed = false);
  // v [n] → const [1, n, 1, 1] (broadcasts over the sequence).
  Value channel_vector(const std::string& name, const Tensor& v);
  // Several vectors in ONE constant [1, Σn, 1, 1], split along the channels into a [1, n_i, 1, 1]
  // value each: one BLOBFILE slot instead of one per vector (C16 allows 16 per program).
  std::vector<Value> channel_vectors(const std::string& name, const std::vector<const Tensor*>& vs);
  void output(Value v) { g.add_output(g.node(v).name, v); }

  // --- ops (name "" = a fresh name) ---
  Value op(ir::Op op, std::vector<Value> in, ir::Attrs attrs = {}, const std::string& name = "") {
    return g.add_node(op, std::move(in), std::move(attrs), name);
  }
  Value add(Value a, Value b, const std::string& name = "") { return op(ir::Op::Add, {a, b}, {}, name); }
  Value sub(Value a, Value b, const std::string& name = "") { return op(ir::Op::Sub, {a, b}, {}, name); }
  Value mul(Value a, Value b, const std::string& name = "") { return op(ir::Op::Mul, {a, b}, {}, name); }
  Value reshape(Value x, std::vector<int64_t> shape, const std::string& name = "") {
    return op(ir::Op::Reshape, {x}, {{"shape", std::move(shape)}}, name);
  }
  Value matmul(Value x, Value y, bool tx, bool ty, const std::string& name = "");
  Value reduce(ir::Op r, Value x, std::vector<int64_t> axes, const std::string& name = "") {
    return op(r, {x}, {{"axes", std::move(axes)}, {"keep_dims", true}}, name);
  }
  const std::vector<int64_t>& shape(Value v) const { return g.type(v).shape; }

  // --- layers ---
  // y = W·x (+ b): conv1x1 with W [out, in, 1, 1], then an add of b [1, out, 1, 1] (C4).
  Value linear(Value x, const std::string& wname, const Tensor& W, const Tensor& b, const std::string& name);
  // y = Wᵀ·dy: the input gradient of a linear layer, a conv1x1 with the transposed weight.
  Value linear_t(Value dy, const std::string& wname, const Tensor& W, const std::string& name);
  // LayerNorm over the channels: (x − mean) · (var + eps)^−½ ⊙ w + b.      x [1, C, 1, S]
  Value layernorm(Value x, const std::string& prefix, const Tensor& w, const Tensor& b, float eps, const std::string& name);
  // RMSNorm over the channels: x · (mean(x²) + eps)^−½ ⊙ w.
  Value rmsnorm(Value x, const std::string& prefix, const Tensor& w, float eps, const std::string& name);
  // Input gradient of y = rmsnorm(x)⊙w given dy: with r = (mean(x²) + eps)^−½ and g = dy⊙w,
  // dx = r·g − x · r³ · mean(g⊙x).
  Value rmsnorm_backward(Value x, Value dy, const std::string& prefix, const Tensor& w, float eps, const std::string& name);
  // Input gradient of y = layernorm(x)⊙w + b given dy: with x̂ = (x − mean)·r, r = (var + eps)^−½
  // and g = dy⊙w, dx = r·(g − mean(g) − x̂·mean(g⊙x̂)).
  Value layernorm_backward(Value x, Value dy, const std::string& prefix, const Tensor& w, float eps,
                           const std::string& name);
  // The derivative of GELU in tanh form at h, times dy (see gpt2_train_kernels.cpp).
  Value gelu_backward(Value h, Value dy, const std::string& name);

  // --- attention pieces ---
  // [1, N·HS, 1, S] ↔ heads [1, N, HS, S] (a reshape: channel n·HS + d is row d of head n).
  Value heads(Value x, int64_t N, int64_t HS) { return reshape(x, {1, N, HS, shape(x)[3]}); }
  Value merge_heads(Value x4, const std::string& name = "") {
    auto s = shape(x4);
    return reshape(x4, {1, s[1] * s[2], 1, s[3]}, name);
  }
  // Grouped-query attention: kv heads [1, NKV, HS, S] repeated to [1, NKV·G, HS, S] (query head h
  // reads kv head h / G), by a broadcast multiply with ones; and its adjoint, the sum over groups.
  Value repeat_kv(Value kv4, int64_t G);
  Value sum_kv_groups(Value x4, int64_t G);
  // Additive causal mask [1, 1, S, S]: 0 where key j ≤ query i, −10⁴ above the diagonal (finite in
  // fp16, and exp of it underflows to exactly 0). window > 0 (a sliding window) also masks the keys
  // j ≤ i − window: a query sees itself and the window − 1 positions before it.
  Value causal_mask(int64_t S, int window = 0);
  // probs [1, NH, S, S] = softmax(qᵀk·scale + mask) over the keys, from q4, k4 [1, NH, HS, S].
  Value attention_probs(Value q4, Value k4, double scale, const std::string& name, int window = 0);
  // RoPE on interleaved channel pairs, llama2.c's convention: within each head, the pair
  // (x[2i], x[2i+1]) at position s is rotated by the angle s·inv_freq[i] (inv_freq [HS/2]: the
  // config's frequencies, llama_rope_frequencies — θ^(−2i/HS), scaled as rope_scaling says):
  //   x'[2i] = x[2i]·cos − x[2i+1]·sin,   x'[2i+1] = x[2i]·sin + x[2i+1]·cos.
  // inverse = true applies the transposed rotation (the negative angle): the backward of RoPE.
  // x [1, N·HS, 1, S] → same shape.
  Value rope(Value x, int64_t N, int64_t HS, const std::vector<float>& inv_freq, bool inverse, const std::string& name);
  // RMSNorm over each head (Qwen3's q_norm / k_norm): x [1, N·HS, 1, S] viewed as heads
  // [1, N, HS, S], each column of a head scaled by (mean over its HS values of x² + eps)^−½, then
  // ⊙ w [HS] (the same weights for every head) → [1, N·HS, 1, S].
  Value head_rmsnorm(Value x, int64_t N, int64_t HS, const std::string& prefix, const Tensor& w, float eps,
                     const std::string& name);
  // delta = scale · B·(A·x) with A [1, r, 1, in] and B [1, out, 1, r] graph inputs, as two matmuls
  // (the weights of a conv must be constants; these are not).     x [1, in, 1, S] → [1, out, 1, S]
  // With a mask [1, r, 1, S] (an input: 1 or 0 per rank row and column), B·(mask ⊙ A·x): each
  // column keeps the rank rows of its own adapter when A and B stack several (lora_decode_qkv_mixed).
  Value lora_delta(Value x, Value a, Value b, double scale, const std::string& name, Value mask = {});
  // Its input gradient: delta = scale·B·(A·x)  ⇒  dx = scale·Aᵀ·(Bᵀ·dy), the adapter's share of
  // the projection's backward (the frozen part is linear_t).   dy [1, out, 1, S] → [1, in, 1, S]
  Value lora_delta_backward(Value dy, Value a, Value b, double scale, const std::string& name);

 private:
  std::map<double, Value> scalars_;
  std::map<std::string, Value> tables_;  // RoPE tables and masks, built once per graph
};

// Adapters on the q and v projections (graph inputs) for lora_attention; absent when a == {}.
struct QVAdapters {
  Value a_q, b_q, a_v, b_v;
  double scale = 0;
};

// The attention sublayer's input norm of the family's kind (ModelFamily::anatomy): ln1 (LayerNorm)
// or attn_norm (RMSNorm), output named xnorm.
Value attention_norm(KernelBuilder& b, const ModelConfig& c, const LayerWeights& l, Value x);

// The projections that open the attention half of a block, from its input x [1, C, 1, S]:
//   xnorm = norm1(x);  q = Wq·xnorm (+ bq), k, v likewise (+ per-head RMSNorm of q, k when the
//   layer has q_norm / k_norm; + RoPE on q, k with the config's frequencies when rope is set).
// Every column is computed on its own: without RoPE the result is position-wise.
struct QkvParts {
  Value xnorm, q, k, v;
};
QkvParts qkv_projections(KernelBuilder& b, const ModelWeights& w, int layer, Value x, const QVAdapters* lora, bool rope);

// The attention half of one block of any family, from its input x [1, C, 1, S]:
//   xnorm = norm1(x);  q = Wq·xnorm (+ bq), k, v likewise (+ per-head RMSNorm of q, k when the
//   layer has q_norm / k_norm; + RoPE on q, k with the config's frequencies for RoPE families)
//   att = softmax(qᵀk/√HS + causal mask, banded by the config's sliding window)·v per head;
//   o = Wo·att (+ bo)
struct AttentionParts {
  Value xnorm, q, k, v, att, o;
};
AttentionParts attention_sublayer(KernelBuilder& b, const ModelWeights& w, int layer, Value x,
                                  const QVAdapters* lora = nullptr);

// The Llama qkv backward (llama_train_kernels.cpp) from its inputs dq, dk, dv (post-RoPE q, k)
// and x: outputs dx, dxnorm, dq_lin, dk_lin. With adapters on q and v, their input gradients
// join dxnorm (llama_lora_qkv_bwd).
void llama_qkv_backward(KernelBuilder& b, const ModelWeights& w, int layer, int S, const QVAdapters* lora = nullptr);

// The GPT-2 qkv backward (gpt2_train_kernels.cpp) from its inputs dq, dk, dv and x: outputs dx,
// dxnorm. With adapters on q and v, s·A_qᵀ·(B_qᵀ·dq) and s·A_vᵀ·(B_vᵀ·dv) join dxnorm (gpt2_lora_qkv_bwd).
void gpt2_qkv_backward(KernelBuilder& b, const ModelWeights& w, int layer, int S, const QVAdapters* lora = nullptr);

// Usage errors for a layer index or sequence length out of range, or the wrong model family.
void check_kernel_args(const ModelWeights& w, int layer, int S, const char* kernel, const char* arch /* or nullptr */);

}  // namespace orion::frontends
