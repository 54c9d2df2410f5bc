// LoRA training with the frozen base kept in 16 bits: `orion lora train --base-dtype f16|bf16` (CPU).
//
// Memory. The fp32 path holds the base's block matrices as fp32 working parameters (4 bytes a
// weight, W' = W + s·B·A merged in place) plus fp32 copies of the adapted W. Here the block
// matrices live once, in f16 or bf16 (2 bytes a weight, Base16Weights: a base stored in that dtype is
// used where it is mapped, anything else converted), and the trainer's
// Params holds only the embeddings, norms and biases (ParamBuffer(config, false)). The embedding
// and the tied classifier stay fp32 (TrainModel's CPU parts read them as such).
//
// Compute. Base16Blocks wraps the ordinary CPU block runner: before a block's forward and before its
// backward it widens that layer's matrices into ONE fp32 layer buffer — for the adapted ones
// W' = widen(W16) + s·B·A (lora_merge_matrix) — and points the layer's LayerParams at it; the inner
// runner keeps its activations per layer as always, so nothing is recomputed. Per step each layer
// is widened twice (O(parameters), small next to the O(B·T·parameters) matmuls). The gradients are
// the LoRA-only backward's (freeze_base: dA, dB from X and dY), computed in fp32 on the widened
// weights: the model trained is exactly the 16-bit base plus the adapter.
#pragma once
#include <memory>

#include "model/lora/lora.h"
#include "train/model/trainer_api.h"

namespace orion::train {

// The block matrices of a model (wq … w3 of every layer) converted to dtype (F16 or BF16).
struct Base16Weights {
  ModelWeights w;  // config and layers' matrices only
  size_t bytes = 0;
  Base16Weights(const ModelWeights& src, DType dtype);
};

class Base16Blocks final : public BlockRunner {
 public:
  // params: ParamBuffer(config, false) (its layers' matrix pointers are set here); base and
  // adapter outlive the runner; the adapter's values are read again after weights_updated().
  Base16Blocks(Params& params, const Base16Weights& base, const LoraAdapter& adapter, Grads* grads, int B, int T,
               const ActivationCheckpointing& ckpt = {});

  const char* name() const override { return "cpu-base16"; }
  void forward_block(int l, const float* x, float* y, int B, int T) override;
  void backward_block(int l, const float* x, const float* dy, float* dx, int B, int T) override;
  void weights_updated() override { loaded_ = -1; }
  bool freeze_base(AdapterGradSink* sink) override { return inner_->freeze_base(sink); }
  size_t layer_buffer_bytes() const { return layer_.size() * sizeof(float); }

 private:
  void load_layer(int l);  // widen (and merge) layer l's matrices into layer_
  Params& p_;
  const Base16Weights& base_;
  const LoraAdapter& adapter_;
  std::unique_ptr<BlockRunner> inner_;
  std::vector<float> layer_;                          // one layer's matrices, fp32
  std::vector<std::pair<LoraTarget, size_t>> slots_;  // each matrix's offset in layer_
  int loaded_ = -1;
};

}  // namespace orion::train
