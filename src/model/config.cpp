#include "model/config.h"

#include <fmt/format.h>

#include "base/error.h"

namespace orion {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::GPT2: return "gpt2";
  }
  return "?";
}

size_t ModelConfig::num_params() const {
  size_t C = dim, Hd = hidden_dim, L = n_layers, kv = size_t(kv_dim());
  size_t emb = size_t(padded_vocab) * C;
  size_t per_layer, extra;
  if (arch == Arch::Llama) {
    per_layer = 2 * C + C * C * 2 + 2 * C * kv + 3 * C * Hd;  // norms, wq wo, wk wv, w1 w2 w3
    extra = C;                                                // final norm
  } else {
    per_layer = 4 * C + 3 * C * C + 3 * C + C * C + C + 2 * C * Hd + Hd + C;  // ln, qkv, proj, fc
    extra = 2 * C + size_t(seq_len) * C;                                     // final ln, positions
  }
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
  if (arch == Arch::Llama && head_dim() % 2 != 0)
    bad("n_heads", fmt::format("head size {} is odd; RoPE rotates pairs", head_dim()));
  if (!(norm_eps > 0 && norm_eps < 1)) bad("norm_eps", fmt::format("must be in (0, 1), got {}", norm_eps));
  if (!(rope_theta > 1)) bad("rope_theta", fmt::format("must be > 1, got {}", rope_theta));
}

std::string ModelConfig::describe() const {
  return fmt::format("{} C={} H={} L={} NH={} NKV={} V={}{} T={} ({:.1f}M params)", arch_name(arch), dim,
                     hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
                     padded_vocab != vocab_size ? fmt::format(" (Vp={})", padded_vocab) : "", seq_len,
                     num_params() / 1e6);
}

namespace {
ModelConfig llama(int C, int H, int L, int NH, int NKV, int V, int T) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = C, c.hidden_dim = H, c.n_layers = L, c.n_heads = NH, c.n_kv_heads = NKV;
  c.vocab_size = c.padded_vocab = V;
  c.seq_len = T;
  return c;
}
ModelConfig gpt2(int C, int L, int NH, int V, int Vp, int T) {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.dim = C, c.hidden_dim = 4 * C, c.n_layers = L, c.n_heads = NH, c.n_kv_heads = NH;
  c.vocab_size = V, c.padded_vocab = Vp, c.seq_len = T;
  return c;
}
struct Preset {
  const char* name;
  ModelConfig config;
};
const std::vector<Preset>& presets() {
  // The stories configs are llama2.c's (Karpathy's TinyStories models); gpt2-124m is GPT-2 small
  // with llm.c's padded vocabulary.
  static const std::vector<Preset> p = {
      {"stories260k", llama(64, 172, 5, 8, 4, 512, 512)},
      {"stories15m", llama(288, 768, 6, 6, 6, 32000, 256)},
      {"stories42m", llama(512, 1376, 8, 8, 8, 32000, 1024)},
      {"stories110m", llama(768, 2048, 12, 12, 12, 32000, 1024)},
      {"gpt2-tiny", gpt2(64, 2, 4, 50257, 50304, 128)},
      {"gpt2-124m", gpt2(768, 12, 12, 50257, 50304, 1024)},
  };
  return p;
}
}  // namespace

std::vector<std::string> config_preset_names() {
  std::vector<std::string> names;
  for (auto& p : presets()) names.push_back(p.name);
  return names;
}

ModelConfig config_preset(const std::string& name) {
  for (auto& p : presets())
    if (name == p.name) return p.config;
  throw_usage_error(fmt::format("unknown model config '{}'", name), "config",
                    fmt::format("choose one of: {}", fmt::join(config_preset_names(), ", ")));
}

}  // namespace orion
