// Training on the CPU — what the training loop calls.
//
//   Params params = Params::from_weights(load_model(path));    // fine-tuning (f16/bf16 → fp32), or
//   Params params(config); init_params(params, seed);           // from scratch, reference init
//   Grads grads(params.config());                               // same layout, one buffer
//   TrainModel model(params, &grads, B, T);                     // activations for B×T tokens
//   AdamW opt(params, {.weight_decay = 0.1f, .clip_norm = 1.0f});
//   for (step …) {
//     model.zero_grad();                                        // grads = 0
//     for (micro-batch …) {                                     // gradient accumulation:
//       float loss = model.forward(tokens, targets);            //   tokens, targets [B, T] (−1: no loss)
//       model.backward(1.0f / accum);                           //   grads += (1/accum)·∂loss/∂params
//     }
//     float gnorm = opt.step(params, grads, lr_of(step));       // lr schedule: the caller's
//     model.weights_updated();                                  // tells the block runner (ANE: reload)
//   }
//   params.to_weights(DType::F16)  → a ModelWeights to save;   params.view() → run Transformer on it.
//   params.num_params(), params.data()/size() and opt.m()/v()/step_count() are what a checkpoint holds.
//
// Who computes what. TrainModel does the embedding, the final norm, the classifier and the loss on
// the CPU (DESIGN.md §3: 32K-channel classifier, table lookups), and hands each transformer block to
// a BlockRunner:
//   forward_block(l, x, y)    y = block_l(x),   x, y [B, T, C]; keeps what its backward needs
//   backward_block(l, x, dy, dx)  dx = ∂loss/∂x from dy = ∂loss/∂y, and accumulates layer l's weight
//                             gradients into grads.layers[l]
// The CPU runners (train/family/<name>/<name>_cpu_train.cpp) compute everything in fp32. An ANE runner
// replaces them through set_blocks(): it runs the block's forward and input-gradient kernels on the
// ANE and must still add the weight gradients (dW = dYᵀ·X, on the CPU) into grads — the loop,
// the optimiser and the checkpoints do not change.
//
// Determinism: every reduction runs in a fixed order, so losses and gradients are bit-identical for
// any number of OpenMP threads (tested for 1 and 2).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/lora/lora.h"
#include "train/loop/adamw.h"
#include "train/model/activation_checkpointing.h"
#include "train/model/params.h"

namespace orion::train {

// Adapter training (train/lora/lora_train.h) with a frozen base: the blocks compute no weight gradient at
// all, and for every projection the sink adapts they report its input X [N, in] and the gradient of
// its output dY [N, out] (rows, N = B·T) — all an adapter needs for its exact gradients
// (dB = s·dYᵀ·(X·Aᵀ), dA = s·(dY·B)ᵀ·X), at O(N·r·(in + out)) instead of dW's O(N·in·out).
class AdapterGradSink {
 public:
  virtual ~AdapterGradSink() = default;
  virtual bool adapted(int layer, LoraTarget t) const = 0;
  virtual void projection(int layer, LoraTarget t, const float* x, const float* dy, int N) = 0;
};

// What a runner with an optional sink does per weight gradient: none when frozen, and the report.
struct FrozenBase {
  AdapterGradSink* sink = nullptr;
  float* grad(float* dw) const { return sink ? nullptr : dw; }  // nullptr: skip this dW
  void report(int layer, LoraTarget t, const float* x, const float* dy, int N) const {
    if (sink && sink->adapted(layer, t)) sink->projection(layer, t, x, dy, N);
  }
};

class BlockRunner {
 public:
  virtual ~BlockRunner() = default;
  virtual const char* name() const = 0;
  // y = block l (x) for B sequences of T tokens; x, y [B, T, C]. Keeps what its backward needs.
  virtual void forward_block(int l, const float* x, float* y, int B, int T) = 0;
  // dx = (∂y/∂x)ᵀ·dy (written, not accumulated), and grads.layers[l] += ∂loss/∂weights of layer l.
  // Called for l = L−1 .. 0 after forward_block(l) with the same x (unchanged), B and T.
  virtual void backward_block(int l, const float* x, const float* dy, float* dx, int B, int T) = 0;
  // The parameters changed (after an optimiser step): a runner holding copies of the weights (the
  // ANE's compiled constants) refreshes them here.
  virtual void weights_updated() {}
  // From now on the base is frozen: backward_block computes no weight gradients and reports the
  // adapted projections to `sink` (nullptr: back to full training). Returns false when this runner
  // cannot (it then keeps computing every dW, and the caller takes the adapter's from dW').
  virtual bool freeze_base(AdapterGradSink* /*sink*/) { return false; }
  // A short note for the trainer's progress line (per-phase times since the last call; the ANE
  // runner's), or "" for none.
  virtual std::string progress() { return {}; }
};

// The CPU runner of the parameters' architecture, sized for up to B×T tokens. grads may be null
// (forward only: evaluation).
// (The family's runner: train/family/training_family.h.)
// ckpt: which blocks keep their activations (the runner holds ckpt.slots(L) sets of them).
std::unique_ptr<BlockRunner> make_cpu_blocks(const Params& params, Grads* grads, int B, int T,
                                             const ActivationCheckpointing& ckpt = {});

class TrainModel {
 public:
  // Activations for up to B sequences of T ≤ seq_len tokens; grads null for forward only.
  // ckpt: gradient checkpointing — the blocks it names are run forward again before their backward.
  TrainModel(const Params& params, Grads* grads, int B, int T, const ActivationCheckpointing& ckpt = {});
  ~TrainModel();  // gradients left pending by zero_grad are zeroed (train/cpu/first_write_zero.h)
  TrainModel(const TrainModel&) = delete;
  TrainModel& operator=(const TrainModel&) = delete;
  void set_blocks(std::unique_ptr<BlockRunner> blocks);
  BlockRunner& blocks() { return *blocks_; }

  // Runs tokens [B, T] through the model and returns the mean cross-entropy over the positions
  // whose target is not −1 (0 when there is none, or targets == nullptr: logits only).
  // b ≤ B and t ≤ T may be smaller than the constructor's. Usage error for out-of-range ids.
  float forward(const int* tokens, const int* targets, int b, int t);
  float forward(const int* tokens, const int* targets) { return forward(tokens, targets, B_, T_); }
  // grads += scale · ∂loss/∂params for the last forward (which must have had targets).
  // Overwrites logits() with ∂loss/∂logits.
  void backward(float scale = 1.0f);
  // grads = 0 — the weight matrices' lazily: their products overwrite them at the next backward,
  // which zeroes any it did not write (train/cpu/first_write_zero.h).
  void zero_grad();
  // After an update of the parameters: the kept bf16 weight packs (runtime/cpu/bf16_weight_packs.h)
  // and the block runner (ANE: reload) catch up. With `changed`, only the ranges listed there
  // (pointers into the parameters, and lengths) changed: the others' packs are kept (adapter
  // training, where W' = W + s·B·A changes only the adapted matrices).
  void weights_updated();
  void weights_updated(const std::vector<std::pair<const float*, size_t>>& changed);
  // Adapter training: no gradient for the embedding, classifier or final norm either, and the
  // blocks' as BlockRunner::freeze_base (its answer is returned; set_blocks passes the sink on).
  bool freeze_base(AdapterGradSink* sink);

  const float* logits() const { return logits_.data(); }  // [b, t, V] of the last forward
  float loss() const { return loss_; }
  int positions_counted() const { return count_; }  // targets ≠ −1 in the last forward
  const ModelConfig& config() const { return p_.config(); }
  size_t num_params() const { return p_.num_params(); }
  int max_batch() const { return B_; }
  int max_seq() const { return T_; }
  const ActivationCheckpointing& checkpointing() const { return ckpt_; }

 private:
  const Params& p_;
  Grads* g_;
  int B_, T_, b_ = 0, t_ = 0;
  std::unique_ptr<BlockRunner> blocks_;
  std::vector<int> tokens_, targets_;  // [B, T] of the last forward
  std::vector<float> residual_;        // [L+1, B, T, C]: input of layer l, and the last block's output
  std::vector<float> xf_;              // [B, T, C] final-norm output (classifier input)
  std::vector<float> fmean_, frstd_;   // [B, T] final-norm statistics
  std::vector<float> logits_;          // [B, T, V] (∂loss/∂logits after backward)
  std::vector<float> losses_, lse_;    // [B, T] per-position loss, log-sum-exp
  std::vector<float> dres_[2], dxf_;   // [B, T, C] gradients of the residual stream, of xf
  AdapterGradSink* frozen_ = nullptr;
  ActivationCheckpointing ckpt_;
  std::vector<float> recompute_out_;  // [B, T, C] a recomputed block's output (equal to x_{l+1}; unused)
  int shared_holds_ = -1;             // the recomputed block whose activations the shared set holds
  float loss_ = 0;
  int count_ = 0;
  bool have_targets_ = false;
};

}  // namespace orion::train
