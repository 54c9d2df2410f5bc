// The Qwen2 family: Qwen2 and Qwen2.5 (model_type "qwen2", Qwen2ForCausalLM).
//   The Llama block (model/family/llama/llama_like.h) with biases on q, k and v (none on o): the
//   checkpoint's self_attn.{q,k,v}_proj.bias; bq and bk follow the q/k row permutation.
//   config.json: LlamaConfig's fields (rope_theta 1e6 in the released models, small ones tied);
//   use_sliding_window true is refused (the released models have it false; sliding_window and
//   max_window_layers then do nothing, as in transformers).
#include "model/family/qwen2/qwen2.h"

#include "model/family/llama/llama_like.h"
#include "model/io/io_internal.h"

namespace orion {
namespace {

class Qwen2Family final : public LlamaLikeFamily {
 public:
  Qwen2Family() : LlamaLikeFamily({Arch::Qwen2, "qwen2", "Qwen2", "qwen2", "Qwen2ForCausalLM", /*qkv_bias=*/true}) {}

  // llama.cpp's "qwen2" files: q/k in Hugging Face's order, for its NEOX-style RoPE.
  std::optional<GgufLayout> gguf() const override { return GgufLayout{"qwen2", false, /*rotate_half_qk=*/true}; }

  // Qwen/Qwen2.5-0.5B: hidden 896, intermediate 4864, 24 layers, 14 heads, 2 kv heads (head size
  // 64), vocab 151936, 32768 positions, rope_theta 1e6, rms_norm_eps 1e-6, tied.
  std::vector<ConfigPreset> presets() const override {
    ModelConfig c;
    c.arch = Arch::Qwen2;
    c.dim = 896, c.hidden_dim = 4864, c.n_layers = 24, c.n_heads = 14, c.n_kv_heads = 2;
    c.vocab_size = c.padded_vocab = 151936, c.seq_len = 32768;
    c.rope_theta = 1e6f, c.norm_eps = 1e-6f;
    return {{"qwen2.5-0.5b", c}};
  }

 protected:
  void read_hf_extras(const io::HfConfigReader& r, ModelConfig&) const override {
    if (r.boolean_or("use_sliding_window", false))
      r.fail("use_sliding_window", "true is not supported (Qwen2's per-layer sliding window)");
  }
  void add_hf_config(const ModelConfig&, nlohmann::json& j) const override { j["use_sliding_window"] = false; }
};

}  // namespace

const ModelFamily& qwen2_family() {
  static const Qwen2Family f;
  return f;
}

}  // namespace orion
