// Trainable parameters and their gradients: fp32, in Orion's canonical layout (model/weights.h),
// every tensor a range of ONE contiguous buffer.
//
// One buffer makes the optimiser a single loop over all parameters (AdamW is elementwise), makes a
// checkpoint one write, and lets the gradients share the layout exactly: grads.data()[i] is the
// gradient of params.data()[i]. Tensors are ordered layer by layer (tok_emb, pos_emb, then each
// layer's attn_norm … b2, then final_norm, final_norm_b, classifier when untied), each starting on a
// 64-byte boundary (the few padding floats stay zero, in the parameters and in the gradients).
//
// The same memory is visible as a ModelWeights (view()), so the inference Transformer and the
// frontends run on the parameters being trained without a copy.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/weights.h"

namespace orion::train {

// Pointers into the buffer of one layer; nullptr for tensors the architecture does not have
// (Llama: no biases; GPT-2: no w3).
struct LayerParams {
  float *attn_norm = nullptr, *attn_norm_b = nullptr;  // [C]
  float *wq = nullptr, *wk = nullptr, *wv = nullptr;   // [NH·HS, C], [NKV·HS, C], [NKV·HS, C]
  float* wo = nullptr;                                 // [C, NH·HS]
  float *bq = nullptr, *bk = nullptr, *bv = nullptr;   // [NH·HS], [NKV·HS], [NKV·HS]
  float* bo = nullptr;                                 // [C]
  float *q_norm = nullptr, *k_norm = nullptr;          // [HS] per-head RMSNorm gains (Qwen3)
  float *ffn_norm = nullptr, *ffn_norm_b = nullptr;    // [C]
  float *w1 = nullptr, *w2 = nullptr, *w3 = nullptr;   // [H, C], [C, H], [H, C]
  float *b1 = nullptr, *b2 = nullptr;                  // [H], [C]
};

// One tensor of the layout.
struct ParamInfo {
  std::string name;            // canonical name: "tok_emb", "layers.3.wq", ...
  std::vector<int64_t> shape;  // [out, in] for matrices, [n] for vectors
  size_t offset = 0;           // in floats, from the start of the buffer (a multiple of 16)
  size_t numel = 0;
  bool matrix() const { return shape.size() == 2; }
};

class ParamBuffer {
 public:
  // A zeroed buffer with the layout of config (shapes as ModelWeights::validate expects them).
  explicit ParamBuffer(const ModelConfig& config);
  // layer_matrices = false: the same layout without the blocks' matrices (wq … w3 get no memory and
  // null pointers): embeddings, norms and biases only — for a runner that brings the frozen block
  // matrices itself (LoRA with a 16-bit base, train/lora/lora_base16.h). view()/to_weights() then lack them.
  ParamBuffer(const ModelConfig& config, bool layer_matrices);
  // The weights converted to fp32 (f16/bf16 matrices widened): fine-tuning from a loaded file.
  // The weights are validated first (Input error naming the tensor on a mismatch).
  static ParamBuffer from_weights(const ModelWeights& w);

  // Move-only: the typed pointers point into the owned buffer. clone() makes a deep copy.
  ParamBuffer(ParamBuffer&&) = default;
  ParamBuffer& operator=(ParamBuffer&&) = default;
  ParamBuffer(const ParamBuffer&) = delete;
  ParamBuffer& operator=(const ParamBuffer&) = delete;
  ParamBuffer clone() const;

  const ModelConfig& config() const { return config_; }
  bool has_layer_matrices() const { return layer_matrices_; }
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }  // floats in the buffer, padding included
  size_t num_params() const;             // real parameters (== config().num_params())
  const std::vector<ParamInfo>& tensors() const { return tensors_; }
  const ParamInfo& tensor(const std::string& name) const;  // Usage error if unknown

  // Typed pointers (llm.c's ParameterTensors). With tied embeddings classifier == tok_emb (its
  // first V rows), so the classifier's gradient lands in the embedding's.
  float* tok_emb = nullptr;  // [Vp, C]
  float* pos_emb = nullptr;  // [T, C]  (GPT-2)
  std::vector<LayerParams> layers;
  float* final_norm = nullptr;    // [C]
  float* final_norm_b = nullptr;  // [C]     (GPT-2)
  float* classifier = nullptr;    // [V, C]

  void zero();
  // Copies w (any matrix dtype) into this buffer; the config's shapes must match.
  void load(const ModelWeights& w);
  // fp32 ModelWeights whose tensors point into this buffer (zero-copy; the view shares ownership
  // of the memory, so it stays valid after this ParamBuffer is gone). Changes to the parameters
  // are seen through the view.
  ModelWeights view() const;
  // An independent copy with matrices in `matrices` dtype (vectors stay f32): for saving.
  ModelWeights to_weights(DType matrices = DType::F32) const;

 private:
  void bind_pointers();
  bool stored(const std::string& name, const std::vector<int64_t>& shape) const {
    return layer_matrices_ || shape.size() != 2 || name.rfind("layers.", 0) != 0;
  }

  ModelConfig config_;
  bool layer_matrices_ = true;
  std::vector<ParamInfo> tensors_;
  std::shared_ptr<float> data_;
  size_t size_ = 0;
};

using Params = ParamBuffer;
using Grads = ParamBuffer;

// Fresh weights as the reference trainers initialise them (deterministic in seed):
//   every matrix and embedding ~ N(0, 0.02²); norm gains 1; biases 0;
//   the projections that write into the residual stream get std 0.02/√(2L), so the sum over L
//   layers keeps the stream's variance near 1 at the start — GPT-2 (llm.c): wo and w2;
//   Llama (llama2.c's model.py): wo and w3.
void init_params(Params& p, uint64_t seed);

}  // namespace orion::train
