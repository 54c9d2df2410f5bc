// The Mistral family (model_type "mistral", MistralForCausalLM): the Llama block
// (model/family/llama/llama_like.h) with an optional sliding attention window.
//   config.json: LlamaConfig's fields and sliding_window: a number W — a token attends to itself and
//   the W − 1 tokens before it (Mistral 7B v0.1: 4096); null — full causal attention (v0.2 and
//   later); absent — MistralConfig's default, 4096. head_dim may differ from hidden / heads
//   (Mistral NeMo: 5120 / 32 heads of 128).
#include "model/family/mistral/mistral.h"

#include "model/family/llama/llama_like.h"
#include "model/io/io_internal.h"

namespace orion {
namespace {

constexpr int kDefaultSlidingWindow = 4096;  // MistralConfig's

class MistralFamily final : public LlamaLikeFamily {
 public:
  MistralFamily() : LlamaLikeFamily({Arch::Mistral, "mistral", "Mistral", "mistral", "MistralForCausalLM"}) {}
  std::vector<ConfigPreset> presets() const override { return {}; }
  // llama.cpp writes Mistral as "llama"; Orion adds llama.attention.sliding_window when there is one.
  std::optional<GgufLayout> gguf() const override { return GgufLayout{"llama", false, false, /*windowed=*/true}; }

 protected:
  void read_hf_extras(const io::HfConfigReader& r, ModelConfig& c) const override {
    c.sliding_window = !r.present("sliding_window") ? kDefaultSlidingWindow : r.count_or("sliding_window", 0);
  }
  void add_hf_config(const ModelConfig& c, nlohmann::json& j) const override {
    j["sliding_window"] = c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nlohmann::json(nullptr);
  }
};

}  // namespace

const ModelFamily& mistral_family() {
  static const MistralFamily f;
  return f;
}

}  // namespace orion
