// Model configurations: the dimensions of a Llama-family ("stories") or GPT-2 transformer.
// Dimension letters used throughout the model code:
//   V vocab, C channels (dim), H FFN hidden, L layers, NH heads, NKV key/value heads,
//   HS head size (C / NH), T sequence length.
#pragma once
#include <string>
#include <vector>

namespace orion {

enum class Arch {
  Llama,  // RMSNorm, RoPE (interleaved pairs, as llama2.c), SwiGLU, grouped-query attention, no biases
  GPT2    // LayerNorm, learned positions, GELU (tanh form), biases, tied classifier
};
const char* arch_name(Arch a);  // "llama", "gpt2"

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

  int head_dim() const { return dim / n_heads; }  // HS
  int kv_dim() const { return head_dim() * n_kv_heads; }
  // Parameter count (embedding counted once when tied; llm.c padding rows included).
  size_t num_params() const;
  // Throws an Input error naming `source` and the offending field when the dimensions are
  // inconsistent (zero or negative sizes, NH not dividing C, NKV not dividing NH, odd HS for RoPE...).
  void validate(const std::string& source) const;
  std::string describe() const;  // one line: "llama C=288 H=768 L=6 NH=6 NKV=6 V=32000 T=256"
};

// Named configurations: stories260k, stories15m, stories42m, stories110m, gpt2-124m, gpt2-tiny.
ModelConfig config_preset(const std::string& name);  // Usage error listing the names if unknown
std::vector<std::string> config_preset_names();

}  // namespace orion
