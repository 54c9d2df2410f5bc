// AdamW (Loshchilov & Hutter): Adam with bias correction and decoupled weight decay.
//
// For each parameter p with gradient g, at step t = 1, 2, …:
//   m = β1·m + (1 − β1)·g              first moment (a running mean of g)
//   v = β2·v + (1 − β2)·g²             second moment (a running mean of g²)
//   m̂ = m / (1 − β1ᵗ), v̂ = v / (1 − β2ᵗ)   bias correction: m, v start at 0 and would be too small
//   p -= lr · (m̂ / (√v̂ + ε) + λ·p)     λ·p: decay "decoupled" from the gradient statistics
// λ applies to matrices (embeddings and projections) only, unless decay_vectors is set: decaying
// norm gains and biases towards 0 only hurts. With clip_norm > 0 the whole gradient is first scaled
// by min(1, clip_norm / ‖g‖₂) (global-norm clipping). The learning rate is given per step; the
// schedule (warmup, cosine) belongs to the caller. This is llm.c's update when clip_norm = 0 and
// weight_decay = 0 (or decay_vectors = true).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "train/model/params.h"

namespace orion::train {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;   // λ
  bool decay_vectors = false;  // also decay 1-D tensors (norm weights, biases)
  float clip_norm = 0.0f;      // ≤ 0: no clipping
};

class AdamW {
 public:
  AdamW(const Params& layout, AdamWConfig config = {});
  // A flat buffer of `size` floats holding tensors at (offset, numel), every one decayed: the
  // parameters of a LoRA adapter (model/lora/lora.h).
  AdamW(const std::vector<std::pair<size_t, size_t>>& tensors, size_t size, AdamWConfig config = {});

  // One update of params from grads; returns the gradient's global L2 norm before clipping.
  // Vectorised and multithreaded; the result is the same for any number of threads.
  // known_norm ≥ 0: the caller already has norm(grads) (grad_norm), which is not summed again.
  float step(Params& params, const Grads& grads, float lr, double known_norm = -1);
  // The same on a flat buffer of the layout given at construction.
  float step(float* params, const float* grads, float lr, double known_norm = -1);
  // ‖g‖₂ over the layout's tensors (padding excluded), as step() computes it.
  double norm(const float* grads) const;

  const AdamWConfig& config() const { return cfg_; }
  int64_t step_count() const { return t_; }
  // Moments in the parameter buffer's layout (what a checkpoint saves and restores).
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }
  void set_step_count(int64_t t) { t_ = t; }

 private:
  struct Chunk {  // a range of the buffer inside one tensor, with its decay
    size_t begin, end;
    float decay;
  };
  AdamWConfig cfg_;
  std::vector<Chunk> chunks_;         // the norm's: ≤ kChunk elements, never across tensors
  std::vector<Chunk> update_chunks_;  // the update's: the same, a matrix's in whole blocks of 16 rows
  std::vector<float> m_, v_;
  int64_t t_ = 0;
};

// The global L2 norm of a gradient buffer, ‖g‖₂, summed in double in a fixed order.
double grad_norm(const Grads& grads);

}  // namespace orion::train
