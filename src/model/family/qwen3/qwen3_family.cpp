// The Qwen3 family: Qwen3 dense models (model_type "qwen3", Qwen3ForCausalLM).
//   The Llama block (model/family/llama/llama_like.h) with an RMSNorm over each head of q and of k,
//   after the projection and before RoPE (self_attn.q_norm.weight, k_norm.weight [HS], the same
//   for every head, permuted like the rows of one head), no biases, and a head size of its own:
//   Qwen3-0.6B has hidden 1024 and 16 heads of 128, so wq is [2048, 1024] and wo [1024, 2048].
//   config.json: LlamaConfig's fields; head_dim defaults to 128 (Qwen3Config); attention_bias and
//   use_sliding_window true are refused.
#include "model/family/qwen3/qwen3.h"

#include "model/family/llama/llama_like.h"
#include "model/io/io_internal.h"

namespace orion {
namespace {

class Qwen3Family final : public LlamaLikeFamily {
 public:
  Qwen3Family()
      : LlamaLikeFamily({Arch::Qwen3, "qwen3", "Qwen3", "qwen3", "Qwen3ForCausalLM", /*qkv_bias=*/false, /*qk_norm=*/true}) {}

  // llama.cpp's "qwen3" files: q/k in Hugging Face's order, for its NEOX-style RoPE.
  std::optional<GgufLayout> gguf() const override { return GgufLayout{"qwen3", false, /*rotate_half_qk=*/true}; }

  // Qwen/Qwen3-0.6B: hidden 1024, intermediate 3072, 28 layers, 16 heads, 8 kv heads, head_dim 128,
  // vocab 151936, 40960 positions, rope_theta 1e6, rms_norm_eps 1e-6, tied.
  std::vector<ConfigPreset> presets() const override {
    ModelConfig c;
    c.arch = Arch::Qwen3;
    c.dim = 1024, c.hidden_dim = 3072, c.n_layers = 28, c.n_heads = 16, c.n_kv_heads = 8, c.head_size = 128;
    c.vocab_size = c.padded_vocab = 151936, c.seq_len = 40960;
    c.rope_theta = 1e6f, c.norm_eps = 1e-6f;
    return {{"qwen3-0.6b", c}};
  }

 protected:
  int default_head_dim() const override { return 128; }
  void read_hf_extras(const io::HfConfigReader& r, ModelConfig&) const override {
    if (r.boolean_or("use_sliding_window", false))
      r.fail("use_sliding_window", "true is not supported (Qwen3's per-layer sliding window)");
  }
  void add_hf_config(const ModelConfig&, nlohmann::json& j) const override {
    j["use_sliding_window"] = false;
    j["attention_bias"] = false;
  }
};

}  // namespace

const ModelFamily& qwen3_family() {
  static const Qwen3Family f;
  return f;
}

}  // namespace orion
