// Model configurations: the dimensions of a transformer of one of the registered families (Llama
// and its relatives Qwen2, Qwen3, Mistral; GPT-2), and the options some of them add (an explicit
// head size, RoPE frequency scaling, a sliding attention window).
// Dimension letters used throughout the model code:
//   V vocab, C channels (dim), H FFN hidden, L layers, NH heads, NKV key/value heads,
//   HS head size (C / NH unless the config gives it), T sequence length.
#pragma once
#include <string>
#include <vector>

namespace orion {

enum class Arch {
  Llama,    // RMSNorm, RoPE (interleaved pairs, as llama2.c), SwiGLU, grouped-query attention, no biases
  GPT2,     // LayerNorm, learned positions, GELU (tanh form), biases, tied classifier
  Qwen2,    // Llama + biases on q, k and v
  Qwen3,    // Llama + a per-head RMSNorm on q and k before RoPE
  Mistral,  // Llama + an optional sliding attention window
};
const char* arch_name(Arch a);  // "llama", "gpt2", "qwen2", "qwen3", "mistral"

// RoPE frequency scaling (Hugging Face config.json rope_scaling). Llama3: Llama 3.1/3.2's long
// context scaling — the low frequencies divided by factor, the high ones kept, the band between
// interpolated (model/family/llama/llama_rope.cpp).
struct RopeScaling {
  enum class Kind { None, Llama3 } kind = Kind::None;
  float factor = 1, low_freq_factor = 1, high_freq_factor = 4;
  int original_max_positions = 0;  // original_max_position_embeddings
  bool operator==(const RopeScaling&) const = default;
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  int dim = 0;           // C
  int hidden_dim = 0;    // H (FFN)
  int n_layers = 0;      // L
  int n_heads = 0;       // NH
  int n_kv_heads = 0;    // NKV (NH % NKV == 0)
  int vocab_size = 0;    // V: real vocabulary
  int padded_vocab = 0;  // Vp ≥ V: rows of the embedding table (llm.c pads 50257 → 50304)
  int seq_len = 0;       // T: maximum context
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  bool tied_embeddings = true;  // classifier shares the token embedding table
  int head_size = 0;            // HS when the config gives it (Qwen3: 128 with C/NH = 64); 0: C / NH
  RopeScaling rope_scaling;
  int sliding_window = 0;  // > 0: a token attends to itself and the sliding_window − 1 before it

  int head_dim() const { return head_size > 0 ? head_size : dim / n_heads; }  // HS
  int kv_dim() const { return head_dim() * n_kv_heads; }
  // Parameter count (embedding counted once when tied; llm.c padding rows included).
  size_t num_params() const;
  // The weights that multiply activations: every layer's projections and the classifier (not the
  // embedding lookups, norms or biases) — 2 FLOPs each per token forward, 6 in a training step.
  size_t matmul_params() const;
  // Throws an Input error naming `source` and the offending field when the dimensions are
  // inconsistent (zero or negative sizes, NH not dividing C, NKV not dividing NH, odd HS for RoPE...).
  void validate(const std::string& source) const;
  std::string describe() const;  // one line: "llama C=288 H=768 L=6 NH=6 NKV=6 V=32000 T=256"

  // What this config asks of a block beyond the plain Llama / GPT-2 ones: "q/k/v biases",
  // "q/k norms", "head_dim 128 ≠ hidden/heads 64", "llama3 RoPE scaling", "sliding window 4096".
  // The CPU paths (inference, training, LoRA) and the ANE inference programs implement them; ANE
  // training and ANE LoRA do not yet. Empty for a plain model.
  std::vector<std::string> cpu_only_features() const;
  // Throws an Input error naming `source` and the first such feature when there is one:
  // "<path> does not implement <feature> yet". path: "the ANE path", "training", ...
  void require_plain_blocks(const std::string& source, const std::string& path) const;
};

// Named configurations: stories260k … stories110m, gpt2-124m, gpt2-tiny, smollm2-135m, llama3.2-1b,
// qwen2.5-0.5b, qwen3-0.6b, … (each family's presets()).
ModelConfig config_preset(const std::string& name);  // Usage error listing the names if unknown
std::vector<std::string> config_preset_names();

}  // namespace orion
