// LoRA training with a 16-bit frozen base (lora_base16.h): the base's block matrices widened one
// layer at a time, with the adapter merged, for the ordinary CPU block runner.
#include "train/lora/lora_base16.h"

#include "base/dtype.h"
#include "base/error.h"

namespace orion::train {

Base16Weights::Base16Weights(const ModelWeights& src, DType dtype) {
  if (dtype != DType::F16 && dtype != DType::BF16) throw_usage_error("the 16-bit base is f16 or bf16", "--base-dtype");
  w.config = src.config;
  w.layers.resize(src.layers.size());
  // A base stored in this dtype (a bf16 file, memory-mapped) is used in place: its storage is kept
  // alive here and nothing is copied. Otherwise each matrix is converted once into our own buffers,
  // and the source (fp32) may be let go.
  bool in_place = true;
  for (const LayerWeights& lw : src.layers)
    for (LoraTarget t : kAllLoraTargets)
      in_place = in_place && (lora_base_matrix(lw, t).empty() || lora_base_matrix(lw, t).dtype == dtype);
  if (in_place) w.share_storage(src);
  for (size_t l = 0; l < src.layers.size(); l++)
    for (LoraTarget t : kAllLoraTargets) {
      const Tensor& m = lora_base_matrix(src.layers[l], t);
      if (m.empty()) continue;  // GPT-2 has no w3
      lora_base_matrix(w.layers[l], t) = in_place ? m : w.copy_as(m, dtype);
      bytes += lora_base_matrix(w.layers[l], t).nbytes();
    }
}

Base16Blocks::Base16Blocks(Params& params, const Base16Weights& base, const LoraAdapter& adapter, Grads* grads, int B, int T,
                           const ActivationCheckpointing& ckpt)
    : p_(params), base_(base), adapter_(adapter) {
  ORION_CHECK(!params.has_layer_matrices(), "the 16-bit base runner brings the block matrices itself");
  const ModelConfig& c = params.config();
  size_t off = 0;
  for (LoraTarget t : kAllLoraTargets) {
    if (lora_base_matrix(base.w.layers[0], t).empty()) continue;
    const auto [out, in] = lora_target_shape(c, t);
    slots_.emplace_back(t, off);
    off += size_t(out * in);
  }
  layer_.resize(off);
  inner_ = make_cpu_blocks(params, grads, B, T, ckpt);
}

void Base16Blocks::load_layer(int l) {
  if (loaded_ == l) return;  // the last forward's layer is the first backward's: widened once
  const float s = adapter_.scale();
  LayerParams& lp = p_.layers[size_t(l)];
  for (const auto& [t, off] : slots_) {
    const Tensor& m = lora_base_matrix(base_.w.layers[size_t(l)], t);
    float* W = layer_.data() + off;
    convert_dtype(m.data, m.dtype, W, DType::F32, size_t(m.numel()));  // f16/bf16 → fp32
    if (const LoraTensor* a = adapter_.find(l, t))                     // W' = W + s·B·A, in place
      lora_merge_matrix(W, W, adapter_.A(*a), adapter_.B(*a), a->out, a->in, adapter_.rank(), s);
    lora_target_member(lp, t) = W;
  }
  loaded_ = l;
}

void Base16Blocks::forward_block(int l, const float* x, float* y, int B, int T) {
  load_layer(l);
  inner_->forward_block(l, x, y, B, T);
}

void Base16Blocks::backward_block(int l, const float* x, const float* dy, float* dx, int B, int T) {
  load_layer(l);
  inner_->backward_block(l, x, dy, dx, B, T);
}

}  // namespace orion::train
