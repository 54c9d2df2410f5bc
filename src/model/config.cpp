#include "model/config.h"

#include <fmt/format.h>

#include "base/error.h"
#include "model/family/family.h"

namespace orion {

const char* arch_name(Arch a) { return model_family(a).name(); }

// Counted from the family's anatomy: per layer two norms, q k v o, and two or three FFN matrices
// (with their biases when the family has them); then the final norm and learned positions.
size_t ModelConfig::num_params() const {
  const Anatomy a = model_family(arch).anatomy();
  size_t C = dim, Hd = hidden_dim, L = n_layers, kv = size_t(kv_dim());
  size_t emb = size_t(padded_vocab) * C;
  size_t per_layer = 2 * C + C * C * 2 + 2 * C * kv + (a.gated_ffn ? 3 : 2) * C * Hd;
  size_t extra = C;                                            // final norm
  if (a.biases) per_layer += 2 * C + C + 2 * kv + C + Hd + C;  // norm biases, bq bk bv bo, b1 b2
  if (a.norm == NormKind::LayerNorm) extra += C;               // final norm's bias
  if (a.positions == Positions::Learned) extra += size_t(seq_len) * C;
  return emb + L * per_layer + extra + (tied_embeddings ? 0 : size_t(vocab_size) * C);
}

void ModelConfig::validate(const std::string& source) const {
  auto bad = [&](const char* field, const std::string& msg) {
    throw_input_error(source, msg, field, -1, "the model file or its config is corrupt or not a supported model");
  };
  auto positive = [&](const char* field, int v, int max) {
    if (v <= 0 || v > max) bad(field, fmt::format("must be in 1..{}, got {}", max, v));
  };
  positive("dim", dim, 1 << 16);
  positive("hidden_dim", hidden_dim, 1 << 18);
  positive("n_layers", n_layers, 1024);
  positive("n_heads", n_heads, 1024);
  positive("n_kv_heads", n_kv_heads, 1024);
  positive("vocab_size", vocab_size, 1 << 22);
  positive("seq_len", seq_len, 1 << 20);
  if (padded_vocab < vocab_size || padded_vocab > vocab_size + (1 << 16))
    bad("padded_vocab", fmt::format("must be ≥ vocab_size {}, got {}", vocab_size, padded_vocab));
  if (dim % n_heads != 0) bad("n_heads", fmt::format("{} heads do not divide dim {}", n_heads, dim));
  if (n_heads % n_kv_heads != 0)
    bad("n_kv_heads", fmt::format("{} key/value heads do not divide {} heads", n_kv_heads, n_heads));
  if (model_family(arch).anatomy().positions == Positions::Rope && head_dim() % 2 != 0)
    bad("n_heads", fmt::format("head size {} is odd; RoPE rotates pairs", head_dim()));
  if (!(norm_eps > 0 && norm_eps < 1)) bad("norm_eps", fmt::format("must be in (0, 1), got {}", norm_eps));
  if (!(rope_theta > 1)) bad("rope_theta", fmt::format("must be > 1, got {}", rope_theta));
}

std::string ModelConfig::describe() const {
  return fmt::format("{} C={} H={} L={} NH={} NKV={} V={}{} T={} ({:.1f}M params)", arch_name(arch), dim, hidden_dim,
                     n_layers, n_heads, n_kv_heads, vocab_size,
                     padded_vocab != vocab_size ? fmt::format(" (Vp={})", padded_vocab) : "", seq_len, num_params() / 1e6);
}

std::vector<std::string> config_preset_names() {
  std::vector<std::string> names;
  for (const ModelFamily* f : model_families())
    for (const ConfigPreset& p : f->presets()) names.push_back(p.name);
  return names;
}

ModelConfig config_preset(const std::string& name) {
  for (const ModelFamily* f : model_families())
    for (const ConfigPreset& p : f->presets())
      if (name == p.name) return p.config;
  throw_usage_error(fmt::format("unknown model config '{}'", name), "config",
                    fmt::format("choose one of: {}", fmt::join(config_preset_names(), ", ")));
}

}  // namespace orion
