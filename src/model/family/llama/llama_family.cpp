// The Llama family: llama2.c's "stories" models and Llama-architecture Hugging Face models
// (model_type "llama": Llama 2, Llama 3.x with llama3 RoPE scaling, SmolLM2, TinyLlama, …).
//   Anatomy: RMSNorm, RoPE (interleaved pairs, as llama2.c), SwiGLU, grouped-query attention, no
//   biases; the classifier tied or not.
//   Files: llama2.c .bin (llama2c.cpp); Hugging Face LlamaForCausalLM: the tensor names and
//     config.json fields every Llama-like family shares (llama_like.cpp).
//   Blocks: llama_block.cpp (prefill; the one-token fast path is family/decode_step.cpp); ANE kernels:
//     llama_train_kernels.cpp (+ the LoRA ones in frontends/lora_kernels.cpp).
#include "model/family/llama/llama.h"
#include "model/family/llama/llama_like.h"
#include "model/io/model_io.h"

namespace orion {
namespace {

ModelConfig llama(int C, int H, int L, int NH, int NKV, int V, int T) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = C, c.hidden_dim = H, c.n_layers = L, c.n_heads = NH, c.n_kv_heads = NKV;
  c.vocab_size = c.padded_vocab = V;
  c.seq_len = T;
  return c;
}

// A Hugging Face model's published config.json: tied, with its rope_theta and rms_norm_eps.
ModelConfig hf_llama(int C, int H, int L, int NH, int NKV, int V, int T, float theta, float eps) {
  ModelConfig c = llama(C, H, L, NH, NKV, V, T);
  c.rope_theta = theta, c.norm_eps = eps;
  return c;
}

// meta-llama/Llama-3.2-1B: hidden 2048, intermediate 8192, 16 layers, 32 heads, 8 kv heads,
// head_dim 64, vocab 128256, 131072 positions, rope_theta 500000, rms_norm_eps 1e-5, tied,
// rope_scaling llama3 (factor 32, low 1, high 4, original 8192).
ModelConfig llama3_2_1b() {
  ModelConfig c = hf_llama(2048, 8192, 16, 32, 8, 128256, 131072, 500000.0f, 1e-5f);
  c.rope_scaling = {RopeScaling::Kind::Llama3, 32.0f, 1.0f, 4.0f, 8192};
  return c;
}

class LlamaFamily final : public LlamaLikeFamily {
 public:
  LlamaFamily() : LlamaLikeFamily({Arch::Llama, "llama", "Llama", "llama", "LlamaForCausalLM"}) {}
  std::optional<ModelFormat> bin_format() const override { return ModelFormat::Llama2c; }
  std::optional<GgufLayout> gguf() const override { return GgufLayout{"llama", /*fused_qkv=*/false}; }

  // llama2.c's configs (Karpathy's TinyStories models), then Hugging Face ones (random weights,
  // for bench and info): HuggingFaceTB/SmolLM2-135M and -360M (head_dim 64, rope_theta 100000,
  // rms_norm_eps 1e-5, 8192 positions, tied) and Llama 3.2 1B.
  std::vector<ConfigPreset> presets() const override {
    return {{"stories260k", llama(64, 172, 5, 8, 4, 512, 512)},
            {"stories15m", llama(288, 768, 6, 6, 6, 32000, 256)},
            {"stories42m", llama(512, 1376, 8, 8, 8, 32000, 1024)},
            {"stories110m", llama(768, 2048, 12, 12, 12, 32000, 1024)},
            {"smollm2-135m", hf_llama(576, 1536, 30, 9, 3, 49152, 8192, 100000.0f, 1e-5f)},
            {"smollm2-360m", hf_llama(960, 2560, 32, 15, 5, 49152, 8192, 100000.0f, 1e-5f)},
            {"llama3.2-1b", llama3_2_1b()}};
  }
};

}  // namespace

const ModelFamily& llama_family() {
  static const LlamaFamily f;
  return f;
}

}  // namespace orion
