// The Llama block and its Hugging Face relatives: what Llama, Qwen2, Qwen3 and Mistral share.
//
// These families run one block (llama_block.cpp; a one-token step is family/decode_step.cpp):
// RMSNorm, RoPE, SwiGLU, grouped-query attention. What sets them apart is data, not code, so each
// is a small class deriving from LlamaLikeFamily that states it:
//   - its anatomy: Qwen2 adds biases on q, k, v (Anatomy::qkv_bias), Qwen3 a per-head RMSNorm on
//     q and k before RoPE (Anatomy::qk_norm); the block applies each when the tensors are there;
//   - its config.json: the fields every LlamaConfig-like config has are read here (dimensions,
//     head_dim, rope_theta, rope_scaling, tie_word_embeddings, and refusals of MoE and bias options);
//     a family adds its own (Mistral's sliding_window) through read_hf_extras / add_hf_config;
//   - the checkpoint's tensor names, which are the same in all four (model.layers.{i}.self_attn.
//     q_proj.weight, …), plus q_proj.bias … (Qwen2) and q_norm.weight, k_norm.weight (Qwen3).
// One block instead of four copies: a fix to the Llama math reaches every relative, and the
// differences stay visible as the flags of each family's anatomy and config.
#pragma once
#include <nlohmann/json.hpp>

#include "model/family/family.h"

namespace orion {

// What names a Llama-like family and how its block differs from Llama's.
struct LlamaLikeIdentity {
  Arch id;
  const char* name;             // "qwen2": configs, checkpoints, adapter files
  const char* display_name;     // "Qwen2", for messages
  const char* hf_model_type;    // config.json's model_type
  const char* hf_architecture;  // config.json's architectures entry
  bool qkv_bias = false;        // Anatomy::qkv_bias
  bool qk_norm = false;         // Anatomy::qk_norm
};

class LlamaLikeFamily : public ModelFamily {
 public:
  explicit LlamaLikeFamily(const LlamaLikeIdentity& identity) : identity_(identity) {}
  Arch id() const override { return identity_.id; }
  const char* name() const override { return identity_.name; }
  const char* display_name() const override { return identity_.display_name; }
  const char* hf_model_type() const override { return identity_.hf_model_type; }
  const char* hf_architecture() const override { return identity_.hf_architecture; }
  // RMSNorm, RoPE, no biases but the family's q/k/v ones, SwiGLU.
  Anatomy anatomy() const override {
    Anatomy a{NormKind::RMSNorm, Positions::Rope, false, true};
    a.qkv_bias = identity_.qkv_bias, a.qk_norm = identity_.qk_norm;
    return a;
  }
  std::optional<ModelFormat> bin_format() const override { return std::nullopt; }

  // config.json: hidden_size C, intermediate_size H, num_hidden_layers L, num_attention_heads NH,
  // num_key_value_heads NKV (default NH), head_dim HS (default default_head_dim(), else C/NH),
  // vocab_size V, max_position_embeddings T, rms_norm_eps, rope_theta (default 10000),
  // rope_scaling (none, "default" or "llama3"), tie_word_embeddings (default false). Refused:
  // another rope_scaling type, attention_bias / mlp_bias true, MoE experts, a hidden_act not silu.
  ModelConfig read_hf_config(const io::HfConfigReader& r) const override;
  nlohmann::json hf_config_json(const ModelConfig& c) const override;
  void read_hf_tensors(io::HfTensorReader& t, ModelWeights& w) const override;
  std::vector<std::pair<std::string, Tensor>> hf_tensors(const ModelWeights& w, ModelWeights& scratch,
                                                         DType dt) const override;
  const PeftLayout& peft() const override;

  void block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n, int pos,
                     KvCache& cache, int layer, const LoraLayerRef* lora) const override;

  // The Llama kernels. Their forward (attention_sublayer) computes every relative's block: q/k/v
  // biases, per-head q/k norms, any head size, scaled RoPE tables, a sliding-window mask, so
  // inference runs them all; training refuses a config whose block needs more than Llama's
  // (ModelConfig::require_plain_blocks), since the backward kernels do not differentiate those.
  std::vector<frontends::KernelSpec> training_kernels(int slot) const override;
  std::vector<frontends::KernelSpec> inference_kernels() const override;
  bool ane_inference_kernels() const override { return false; }

 protected:
  // HS when config.json has no head_dim (0: C / NH). Qwen3Config's default is 128.
  virtual int default_head_dim() const { return 0; }
  // The family's own config.json fields, read after the shared ones / added to the shared ones.
  virtual void read_hf_extras(const io::HfConfigReader&, ModelConfig&) const {}
  virtual void add_hf_config(const ModelConfig&, nlohmann::json&) const {}

 private:
  LlamaLikeIdentity identity_;
};

}  // namespace orion
