// The layers of a transformer as forward/backward pairs (llm.c style), shared by the Llama and
// GPT-2 training code (train/family/*/*_cpu_train.cpp, train_model.cpp).
//
// Dimension letters, used in every shape comment of src/train:
//   B  batch (sequences)         T  time (tokens per sequence)       N = B·T rows of activations
//   C  channels (model dim)      H  FFN hidden                        V  vocabulary (real, unpadded)
//   NH query heads   NKV key/value heads (NKV divides NH)   HS head size (C = NH·HS for the queries)
// Activations are row-major: x [N, C] is N rows of C floats, row n = b·T + t.
//
// Conventions (llm.c's):
//   - x_forward(out, <saved for backward>, inp, <params>, <dims>)
//     x_backward(dinp, <dparams>, dout, <saved>, inp, <params>, <dims>)
//     the backward takes the forward's arguments and walks its steps in reverse.
//   - Backward functions ACCUMULATE (+=) into every gradient they produce, because a tensor used
//     twice (a residual, a tied embedding, GQA's shared keys) receives the sum of its uses, and
//     gradient accumulation over micro-batches is the same sum. Callers zero gradients first.
//     Two exceptions, said at the function: RoPE's backward (a rotation, applied in place) and the
//     cross-entropy's (it writes dlogits over the logits).
//   - Every function is instantiated for float (training) and double (the finite-difference tests
//     check each backward in double, where the difference quotient is accurate to ~1e-8).
//   - Multithreaded with OpenMP; every sum that crosses rows is done in a fixed order, so results
//     are bit-identical for any number of threads.
#pragma once
#include <cstddef>

namespace orion::train {

// --- embedding ---------------------------------------------------------------------------------
// out[b, t, :] = wte[tokens[b, t], :] (+ wpe[t, :] when wpe != nullptr, GPT-2's learned positions)
//   out [N, C]   tokens [N]   wte [Vp, C]   wpe [T, C] or nullptr
template <typename F>
void encoder_forward(F* out, const int* tokens, const F* wte, const F* wpe, int B, int T, int C);
// dwte[tokens[n]] += dout[n]; dwpe[t] += dout[b, t] summed over b.
template <typename F>
void encoder_backward(F* dwte, F* dwpe, const F* dout, const int* tokens, int B, int T, int C);

// --- normalisation -----------------------------------------------------------------------------
// RMSNorm: out = x · rstd ⊙ w,  rstd = 1/√(mean(x²) + eps)     out, inp [N, C]  w [C]  rstd [N]
template <typename F>
void rmsnorm_forward(F* out, F* rstd, const F* inp, const F* w, int N, int C, float eps);
template <typename F>
void rmsnorm_backward(F* dinp, F* dw, const F* dout, const F* inp, const F* w, const F* rstd, int N, int C);

// LayerNorm: out = (x − mean) · rstd ⊙ w + b,  rstd = 1/√(var + eps)
//   out, inp [N, C]  w, b [C]  mean, rstd [N]
template <typename F>
void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* w, const F* b, int N, int C, float eps);
template <typename F>
void layernorm_backward(F* dinp, F* dw, F* db, const F* dout, const F* inp, const F* w, const F* mean, const F* rstd, int N,
                        int C);

// --- linear layer ------------------------------------------------------------------------------
// out = inp · Wᵀ + bias       out [N, OC]  inp [N, IC]  W [OC, IC]  bias [OC] or nullptr
// (float: cpu::matmul, the kernel inference uses; double: a plain triple loop for the tests)
template <typename F>
void matmul_forward(F* out, const F* inp, const F* W, const F* bias, int N, int IC, int OC);
// dinp += dout · W,  dW += doutᵀ · inp,  dbias += Σ_n dout[n]   (any of dinp, dW, dbias may be nullptr: skipped)
template <typename F>
void matmul_backward(F* dinp, F* dW, F* dbias, const F* dout, const F* inp, const F* W, int N, int IC, int OC);

// --- rotary position embedding (Llama) ----------------------------------------------------------
// Each head's channel pairs (2i, 2i+1) of the token at time t turn by the angle t·θ^(−2i/HS)
// (llama2.c's interleaved convention, as cpu::rope). out may equal inp.
//   out, inp [N, NHx·HS] with NHx heads (NH for queries, NKV for keys)
template <typename F>
void rope_forward(F* out, const F* inp, int B, int T, int NHx, int HS, float theta);
// A rotation's inverse is its transpose: dinp = Rᵀ·dout (turn back by the same angle).
// WRITES dinp (does not accumulate); dinp may equal dout.
template <typename F>
void rope_backward(F* dinp, const F* dout, int B, int T, int NHx, int HS, float theta);
// The same with given pair frequencies inv_freq [HS/2] (angle t·inv_freq[i]; llama3 RoPE scaling,
// model/family/llama/llama_rope.cpp). With the plain frequencies θ^(−2i/HS) bit-identical to the above.
template <typename F>
void rope_forward(F* out, const F* inp, int B, int T, int NHx, int HS, const float* inv_freq);
template <typename F>
void rope_backward(F* dinp, const F* dout, int B, int T, int NHx, int HS, const float* inv_freq);

// --- causal self-attention ----------------------------------------------------------------------
// For each sequence b, query head h, time t (kv head g = h / (NH/NKV)):
//   att[b, h, t, s] = softmax_s( q[b,t,h]·k[b,s,g] / √HS ),  s ≤ t   (0 for s > t)
//   out[b, t, h]    = Σ_s att[b, h, t, s] · v[b, s, g]
//   q, out [N, NH·HS]   k, v [N, NKV·HS]   att [B, NH, T, T] (kept for backward)
// window > 0 (a sliding window, Mistral): only t − window < s ≤ t are seen, the others get 0. The
// backward needs no window: a probability of 0 contributes nothing to any gradient.
template <typename F>
void attention_forward(F* out, F* att, const F* q, const F* k, const F* v, int B, int T, int NH, int NKV, int HS,
                       int window = 0);
template <typename F>
void attention_backward(F* dq, F* dk, F* dv, const F* dout, const F* att, const F* q, const F* k, const F* v, int B, int T,
                        int NH, int NKV, int HS);

// --- activations -------------------------------------------------------------------------------
// SwiGLU: out = silu(gate) ⊙ up, silu(g) = g·σ(g)        out, gate, up [n]
template <typename F>
void swiglu_forward(F* out, const F* gate, const F* up, size_t n);
template <typename F>
void swiglu_backward(F* dgate, F* dup, const F* dout, const F* gate, const F* up, size_t n);

// GELU, tanh form: out = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))   out, inp [n]
// th [n] or nullptr: keeps the tanh for the backward, which then computes none.
template <typename F>
void gelu_forward(F* out, F* th, const F* inp, size_t n);
// th: the forward's, or nullptr (recomputed)
template <typename F>
void gelu_backward(F* dinp, const F* dout, const F* inp, const F* th, size_t n);

// Residual: out = a + b;  da += dout, db += dout        [n]
template <typename F>
void residual_forward(F* out, const F* a, const F* b, size_t n);
template <typename F>
void residual_backward(F* da, F* db, const F* dout, size_t n);

// --- loss --------------------------------------------------------------------------------------
// Per position n with target y = targets[n] (−1: ignored, loss 0):
//   lse[n] = log Σ_v exp(logits[n, v]),  losses[n] = lse[n] − logits[n, y]   (= −log softmax_y)
//   logits [N, V]   targets [N]   losses, lse [N]
// Returns the number of positions counted (targets ≠ −1). Targets must be in −1 .. V−1.
template <typename F>
int crossentropy_forward(F* losses, F* lse, const F* logits, const int* targets, int N, int V);
// dlogits[n, v] = scale · (softmax(logits[n])[v] − [v == y])   for counted rows, 0 for ignored
// (scale = dloss/dlosses[n], 1/count for the mean). WRITES dlogits; it may alias logits.
template <typename F>
void crossentropy_backward(F* dlogits, const F* logits, const F* lse, const int* targets, F scale, int N, int V);

}  // namespace orion::train
