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
  size_t C = dim, Hd = hidden_dim, L = n_layers, kv = size_t(kv_dim()), Q = size_t(n_heads) * head_dim();
  size_t emb = size_t(padded_vocab) * C;
  size_t per_layer = 2 * C + C * Q * 2 + 2 * C * kv + (a.gated_ffn ? 3 : 2) * C * Hd;
  size_t extra = C;                                            // final norm
  if (a.biases) per_layer += 2 * C + Q + 2 * kv + C + Hd + C;  // norm biases, bq bk bv bo, b1 b2
  if (a.qkv_bias) per_layer += Q + 2 * kv;                     // bq bk bv
  if (a.qk_norm) per_layer += 2 * size_t(head_dim());          // q_norm k_norm
  if (a.norm == NormKind::LayerNorm) extra += C;               // final norm's bias
  if (a.positions == Positions::Learned) extra += size_t(seq_len) * C;
  return emb + L * per_layer + extra + (tied_embeddings ? 0 : size_t(vocab_size) * C);
}

size_t ModelConfig::matmul_params() const {
  const size_t C = dim, kv = size_t(kv_dim()), Q = size_t(n_heads) * head_dim();
  const size_t per_layer =
      2 * C * Q + 2 * C * kv + (model_family(arch).anatomy().gated_ffn ? 3 : 2) * C * size_t(hidden_dim);
  return size_t(n_layers) * per_layer + size_t(vocab_size) * C;
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
  if (head_size == 0 && dim % n_heads != 0) bad("n_heads", fmt::format("{} heads do not divide dim {}", n_heads, dim));
  if (head_size < 0 || head_size > (1 << 12)) bad("head_dim", fmt::format("must be in 1..4096, got {}", head_size));
  if (sliding_window < 0) bad("sliding_window", fmt::format("must be ≥ 0, got {}", sliding_window));
  if (rope_scaling.kind == RopeScaling::Kind::Llama3) {
    const RopeScaling& r = rope_scaling;
    if (!(r.factor >= 1)) bad("rope_scaling.factor", fmt::format("must be ≥ 1, got {}", r.factor));
    if (!(r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor))
      bad("rope_scaling.high_freq_factor", fmt::format("must exceed low_freq_factor {} > 0, got {}", r.low_freq_factor,
                                                        r.high_freq_factor));
    if (r.original_max_positions <= 0)
      bad("rope_scaling.original_max_position_embeddings", fmt::format("must be positive, got {}", r.original_max_positions));
  }
  if (n_heads % n_kv_heads != 0)
    bad("n_kv_heads", fmt::format("{} key/value heads do not divide {} heads", n_kv_heads, n_heads));
  if (model_family(arch).anatomy().positions == Positions::Rope && head_dim() % 2 != 0)
    bad("n_heads", fmt::format("head size {} is odd; RoPE rotates pairs", head_dim()));
  if (!(norm_eps > 0 && norm_eps < 1)) bad("norm_eps", fmt::format("must be in (0, 1), got {}", norm_eps));
  if (!(rope_theta > 1)) bad("rope_theta", fmt::format("must be > 1, got {}", rope_theta));
}

// The features beyond a plain block, after the dimensions: "qwen3 C=1024 … (596.0M params) q/k norms,
// head_dim 128 ≠ hidden/heads 64, rope_theta 1e+06, tied". Plain models describe themselves as before.
std::string ModelConfig::describe() const {
  std::string s = fmt::format("{} C={} H={} L={} NH={} NKV={} V={}{} T={} ({:.1f}M params)", arch_name(arch), dim,
                              hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
                              padded_vocab != vocab_size ? fmt::format(" (Vp={})", padded_vocab) : "", seq_len,
                              num_params() / 1e6);
  std::vector<std::string> features = cpu_only_features();
  if (!features.empty()) {
    if (rope_theta != 10000.0f) features.push_back(fmt::format("rope_theta {:g}", rope_theta));
    features.push_back(tied_embeddings ? "tied" : "untied");
    s += " " + fmt::format("{}", fmt::join(features, ", "));
  }
  return s;
}

std::vector<std::string> ModelConfig::cpu_only_features() const {
  const Anatomy a = model_family(arch).anatomy();
  std::vector<std::string> f;
  if (a.qkv_bias) f.push_back("q/k/v biases");
  if (a.qk_norm) f.push_back("q/k norms");
  if (head_size > 0 && head_size * n_heads != dim)
    f.push_back(fmt::format("head_dim {} ≠ hidden/heads {}", head_size, dim / n_heads));
  if (rope_scaling.kind == RopeScaling::Kind::Llama3)
    f.push_back(fmt::format("llama3 RoPE scaling (factor {:g})", rope_scaling.factor));
  if (sliding_window > 0) f.push_back(fmt::format("sliding window {}", sliding_window));
  return f;
}

void ModelConfig::require_plain_blocks(const std::string& source, const std::string& path) const {
  const std::vector<std::string> f = cpu_only_features();
  if (f.empty()) return;
  throw_input_error(source, fmt::format("{} does not implement {} yet ({} model)", path, f[0], arch_name(arch)), {}, -1,
                    "the CPU backend runs this model (generate, train, lora train), and orion generate on the ANE");
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
