// The Llama family: llama2.c's "stories" models and Llama-architecture Hugging Face models.
//   Anatomy: RMSNorm, RoPE (interleaved pairs, as llama2.c), SwiGLU, grouped-query attention, no
//   biases; the classifier tied or not.
//   Files: llama2.c .bin (llama2c.cpp); Hugging Face LlamaForCausalLM:
//     model.embed_tokens.weight [V, C]                      → tok_emb
//     model.layers.{i}.input_layernorm.weight [C]          → attn_norm
//     model.layers.{i}.self_attn.q_proj.weight [NH·HS, C]  → wq   (rows permuted for rotate-half RoPE)
//     model.layers.{i}.self_attn.k_proj.weight [NKV·HS, C] → wk   (same permutation, NKV heads)
//     model.layers.{i}.self_attn.v_proj.weight [NKV·HS, C] → wv
//     model.layers.{i}.self_attn.o_proj.weight [C, NH·HS]  → wo
//     model.layers.{i}.post_attention_layernorm.weight [C] → ffn_norm
//     model.layers.{i}.mlp.gate_proj / up_proj [H, C], down_proj [C, H] → w1 / w3, w2
//     model.norm.weight [C] → final_norm;   lm_head.weight [V, C] → classifier (when untied)
//   config.json: hidden_size C, intermediate_size H, num_hidden_layers L, num_attention_heads NH,
//     num_key_value_heads NKV (default NH), vocab_size V, max_position_embeddings T, rms_norm_eps,
//     rope_theta (default 10000), tie_word_embeddings (default false).
//   Blocks: llama_block.cpp (prefill), llama_decode.cpp (one-token fast path); ANE kernels:
//     llama_train_kernels.cpp (+ the LoRA ones in frontends/lora_kernels.cpp).
#include <nlohmann/json.hpp>

#include "model/family/llama/llama.h"
#include "model/frontends/lora_frontends.h"
#include "model/io/io_internal.h"

namespace orion {
namespace {

using nlohmann::json;
using namespace frontends;

ModelConfig llama(int C, int H, int L, int NH, int NKV, int V, int T) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = C, c.hidden_dim = H, c.n_layers = L, c.n_heads = NH, c.n_kv_heads = NKV;
  c.vocab_size = c.padded_vocab = V;
  c.seq_len = T;
  return c;
}

class LlamaFamily final : public ModelFamily {
 public:
  Arch id() const override { return Arch::Llama; }
  const char* name() const override { return "llama"; }
  const char* display_name() const override { return "Llama"; }
  Anatomy anatomy() const override { return {NormKind::RMSNorm, Positions::Rope, false, true}; }
  std::optional<ModelFormat> bin_format() const override { return ModelFormat::Llama2c; }

  // llama2.c's configs (Karpathy's TinyStories models).
  std::vector<ConfigPreset> presets() const override {
    return {{"stories260k", llama(64, 172, 5, 8, 4, 512, 512)},
            {"stories15m", llama(288, 768, 6, 6, 6, 32000, 256)},
            {"stories42m", llama(512, 1376, 8, 8, 8, 32000, 1024)},
            {"stories110m", llama(768, 2048, 12, 12, 12, 32000, 1024)}};
  }

  const char* hf_model_type() const override { return "llama"; }

  ModelConfig read_hf_config(const io::HfConfigReader& r) const override {
    ModelConfig c;
    c.arch = Arch::Llama;
    c.dim = r.positive_int("hidden_size");
    c.hidden_dim = r.positive_int("intermediate_size");
    c.n_layers = r.positive_int("num_hidden_layers");
    c.n_heads = r.positive_int("num_attention_heads");
    c.n_kv_heads = r.positive_int_or("num_key_value_heads", c.n_heads);
    c.vocab_size = c.padded_vocab = r.positive_int("vocab_size");
    c.seq_len = r.positive_int("max_position_embeddings");
    c.norm_eps = r.positive_float("rms_norm_eps", 1e-6f);  // LlamaConfig's default
    c.rope_theta = r.positive_float("rope_theta", 10000.0f);
    c.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
    if (r.has("rope_scaling")) r.fail("rope_scaling", "RoPE scaling is not supported (Orion implements plain RoPE)");
    if (r.has("head_dim") && r.positive_int("head_dim") * c.n_heads != c.dim)
      r.fail("head_dim", fmt::format("head_dim × num_attention_heads must equal hidden_size {}", c.dim));
    return c;
  }

  json hf_config_json(const ModelConfig& c) const override {
    return {{"architectures", json::array({"LlamaForCausalLM"})},
            {"model_type", "llama"},
            {"hidden_size", c.dim},
            {"intermediate_size", c.hidden_dim},
            {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads},
            {"num_key_value_heads", c.n_kv_heads},
            {"vocab_size", c.vocab_size},
            {"max_position_embeddings", c.seq_len},
            {"rms_norm_eps", io::json_float(c.norm_eps)},
            {"rope_theta", io::json_float(c.rope_theta)},
            {"tie_word_embeddings", c.tied_embeddings},
            {"hidden_act", "silu"}};
  }

  void read_hf_tensors(io::HfTensorReader& t, ModelWeights& w) const override {
    const ModelConfig& c = w.config;
    const int64_t C = c.dim, H = c.hidden_dim, V = c.vocab_size, Q = int64_t(c.n_heads) * c.head_dim(), KV = c.kv_dim();
    w.tok_emb = t.matrix("model.embed_tokens.weight", V, C);
    for (int i = 0; i < c.n_layers; i++) {
      LayerWeights& l = w.layers[size_t(i)];
      auto n = [&](const char* s) { return fmt::format("model.layers.{}.{}", i, s); };
      l.attn_norm = t.vector(n("input_layernorm.weight"), C);
      l.wq = io::hf_unpermute_rows(w, t.matrix(n("self_attn.q_proj.weight"), Q, C), c.n_heads);
      l.wk = io::hf_unpermute_rows(w, t.matrix(n("self_attn.k_proj.weight"), KV, C), c.n_kv_heads);
      l.wv = t.matrix(n("self_attn.v_proj.weight"), KV, C);
      l.wo = t.matrix(n("self_attn.o_proj.weight"), C, Q);
      l.ffn_norm = t.vector(n("post_attention_layernorm.weight"), C);
      l.w1 = t.matrix(n("mlp.gate_proj.weight"), H, C);
      l.w3 = t.matrix(n("mlp.up_proj.weight"), H, C);
      l.w2 = t.matrix(n("mlp.down_proj.weight"), C, H);
    }
    w.final_norm = t.vector("model.norm.weight", C);
    w.classifier = c.tied_embeddings ? w.tok_emb : t.matrix("lm_head.weight", V, C);
  }

  std::vector<std::pair<std::string, Tensor>> hf_tensors(const ModelWeights& w, ModelWeights& scratch,
                                                         DType) const override {
    const ModelConfig& c = w.config;
    std::vector<std::pair<std::string, Tensor>> out;
    out.emplace_back("model.embed_tokens.weight", io::row_slice(w.tok_emb, 0, c.vocab_size));
    for (int i = 0; i < c.n_layers; i++) {
      const LayerWeights& l = w.layers[size_t(i)];
      auto n = [&](const char* s) { return fmt::format("model.layers.{}.{}", i, s); };
      out.emplace_back(n("input_layernorm.weight"), l.attn_norm);
      out.emplace_back(n("self_attn.q_proj.weight"), io::hf_permute_rows(scratch, l.wq, c.n_heads));
      out.emplace_back(n("self_attn.k_proj.weight"), io::hf_permute_rows(scratch, l.wk, c.n_kv_heads));
      out.emplace_back(n("self_attn.v_proj.weight"), l.wv);
      out.emplace_back(n("self_attn.o_proj.weight"), l.wo);
      out.emplace_back(n("post_attention_layernorm.weight"), l.ffn_norm);
      out.emplace_back(n("mlp.gate_proj.weight"), l.w1);
      out.emplace_back(n("mlp.up_proj.weight"), l.w3);
      out.emplace_back(n("mlp.down_proj.weight"), l.w2);
    }
    out.emplace_back("model.norm.weight", w.final_norm);
    if (!c.tied_embeddings) out.emplace_back("lm_head.weight", io::row_slice(w.classifier, 0, c.vocab_size));
    return out;
  }

  std::optional<GgufLayout> gguf() const override { return GgufLayout{"llama", /*fused_qkv=*/false}; }

  const PeftLayout& peft() const override {
    static const PeftLayout p = {"model.layers.",
                                 {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                  "mlp.gate_proj", "mlp.down_proj", "mlp.up_proj"},
                                 {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "down_proj", "up_proj"},
                                 /*fan_in_fan_out=*/false,
                                 /*permuted_qk=*/true};
    return p;
  }

  void block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n, int pos,
                     float* k_cache, float* v_cache, const LoraLayerRef* lora) const override {
    llama_block_forward(c, l, a, n, pos, k_cache, v_cache, lora);
  }

  bool decode_token(const ModelWeights& w, Transformer::Activations& a, int pos, float* key_cache, float* value_cache,
                    int max_seq, float* logits) const override {
    llama_decode_token(w, a, pos, key_cache, value_cache, max_seq, logits);
    return true;
  }

  // The attention backward's two middle kernels (sdpa_bwd1, sdpa_bwd2) serve every family.
  std::vector<KernelSpec> training_kernels(int slot) const override {
    std::vector<KernelSpec> k = {{"llama_fwd_attn", layer_kernel(llama_fwd_attn), true},
                                 {"llama_fwd_ffn", layer_kernel(llama_fwd_ffn), false},
                                 {"llama_ffn_bwd", layer_kernel(llama_ffn_bwd), false},
                                 {"sdpa_bwd1", layer_kernel(sdpa_bwd1), true},
                                 {"sdpa_bwd2", sdpa_bwd2_kernel(), true, false},
                                 {"llama_qkv_bwd", layer_kernel(llama_qkv_bwd), true}};
    if (slot > 0) {
      k[kFwdAttn] = {"llama_lora_fwd_attn", lora_kernel(llama_lora_fwd_attn, slot), true};
      k[kQkvBwd] = {"llama_lora_qkv_bwd", lora_kernel(llama_lora_qkv_bwd, slot), true};
    }
    return k;
  }

  // No decode kernels: fwd_attn at position 0 gives q, k, v (infer/ane_model.h).
  std::vector<KernelSpec> inference_kernels() const override {
    return {{"llama_fwd_attn", layer_kernel(llama_fwd_attn), true},
            {"llama_fwd_ffn", layer_kernel(llama_fwd_ffn), false},
            {"llama_fwd_attn", layer_kernel(llama_fwd_attn), true},
            {"llama_fwd_ffn", layer_kernel(llama_fwd_ffn), false},
            {"final_norm", final_norm_kernel(), false, false}};
  }
  bool ane_inference_kernels() const override { return false; }
};

}  // namespace

const ModelFamily& llama_family() {
  static const LlamaFamily f;
  return f;
}

}  // namespace orion
