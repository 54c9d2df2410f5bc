// The GPT-2 family (GPT-2 small and llm.c's models).
//   Anatomy: LayerNorm, learned positions, GELU (tanh form), biases on every linear and norm, a
//   tied classifier; llm.c pads the vocabulary to a multiple of 64.
//   Files: llm.c .bin (llmc.cpp); Hugging Face GPT2LMHeadModel (names with or without the
//   "transformer." prefix) — Conv1D weights are stored [in, out], the transpose of Orion's layout:
//     wte.weight [V, C], wpe.weight [T, C]
//     h.{i}.ln_1.weight / .bias [C]
//     h.{i}.attn.c_attn.weight [C, 3C] (columns q | k | v), .bias [3C]
//     h.{i}.attn.c_proj.weight [C, C], .bias [C]
//     h.{i}.ln_2.weight / .bias [C]
//     h.{i}.mlp.c_fc.weight [C, H], .bias [H];  h.{i}.mlp.c_proj.weight [H, C], .bias [C]
//     ln_f.weight / .bias [C];  the classifier is tied to wte
//   config.json: n_embd C, n_inner H (null → 4C), n_layer L, n_head NH, vocab_size V,
//     n_positions T (or n_ctx), layer_norm_epsilon; the classifier is always tied.
//   Blocks: gpt2_block.cpp; ANE kernels: gpt2_kernels.cpp (inference), gpt2_train_kernels.cpp.
#include <nlohmann/json.hpp>

#include "model/family/gpt2/gpt2.h"
#include "model/frontends/lora_frontends.h"
#include "model/io/io_internal.h"

namespace orion {
namespace {

using nlohmann::json;
using namespace frontends;

ModelConfig gpt2(int C, int L, int NH, int V, int Vp, int T) {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.dim = C, c.hidden_dim = 4 * C, c.n_layers = L, c.n_heads = NH, c.n_kv_heads = NH;
  c.vocab_size = V, c.padded_vocab = Vp, c.seq_len = T;
  return c;
}

class Gpt2Family final : public ModelFamily {
 public:
  Arch id() const override { return Arch::GPT2; }
  const char* name() const override { return "gpt2"; }
  const char* display_name() const override { return "GPT-2"; }
  Anatomy anatomy() const override { return {NormKind::LayerNorm, Positions::Learned, true, false}; }
  int padded_vocab(int V) const override { return (V + 63) / 64 * 64; }
  std::optional<ModelFormat> bin_format() const override { return ModelFormat::LlmC; }

  // gpt2-124m is GPT-2 small with llm.c's padded vocabulary.
  std::vector<ConfigPreset> presets() const override {
    return {{"gpt2-tiny", gpt2(64, 2, 4, 50257, 50304, 128)}, {"gpt2-124m", gpt2(768, 12, 12, 50257, 50304, 1024)}};
  }

  const char* hf_model_type() const override { return "gpt2"; }
  const char* hf_architecture() const override { return "GPT2LMHeadModel"; }

  ModelConfig read_hf_config(const io::HfConfigReader& r) const override {
    ModelConfig c;
    c.arch = Arch::GPT2;
    c.dim = r.positive_int("n_embd");
    c.hidden_dim = r.positive_int_or("n_inner", 4 * c.dim);
    c.n_layers = r.positive_int("n_layer");
    c.n_heads = c.n_kv_heads = r.positive_int("n_head");
    c.vocab_size = c.padded_vocab = r.positive_int("vocab_size");
    c.seq_len = r.has("n_positions") ? r.positive_int("n_positions") : r.positive_int("n_ctx");
    c.norm_eps = r.positive_float("layer_norm_epsilon", 1e-5f);
    c.tied_embeddings = true;
    if (!r.boolean_or("tie_word_embeddings", true))
      r.fail("tie_word_embeddings", "GPT-2 models with an untied classifier are not supported");
    return c;
  }

  json hf_config_json(const ModelConfig& c) const override {
    return {{"architectures", json::array({hf_architecture()})},
            {"model_type", "gpt2"},
            {"n_embd", c.dim},
            {"n_inner", c.hidden_dim == 4 * c.dim ? json(nullptr) : json(c.hidden_dim)},
            {"n_layer", c.n_layers},
            {"n_head", c.n_heads},
            {"vocab_size", c.vocab_size},
            {"n_positions", c.seq_len},
            {"n_ctx", c.seq_len},
            {"layer_norm_epsilon", io::json_float(c.norm_eps)},
            {"activation_function", "gelu_new"},
            {"tie_word_embeddings", true}};
  }

  void read_hf_tensors(io::HfTensorReader& t, ModelWeights& w) const override {
    const ModelConfig& c = w.config;
    const int64_t C = c.dim, H = c.hidden_dim;
    if (t.has("transformer.wte.weight")) t.prefix = "transformer.";
    w.tok_emb = t.matrix("wte.weight", c.vocab_size, C);
    w.pos_emb = t.matrix("wpe.weight", c.seq_len, C);
    for (int i = 0; i < c.n_layers; i++) {
      LayerWeights& l = w.layers[size_t(i)];
      auto n = [&](const char* s) { return fmt::format("h.{}.{}", i, s); };
      l.attn_norm = t.vector(n("ln_1.weight"), C);
      l.attn_norm_b = t.vector(n("ln_1.bias"), C);
      // c_attn [C, 3C] transposed is [3C, C]: rows q, then k, then v — three views into one copy.
      Tensor qkv = t.conv1d(n("attn.c_attn.weight"), C, 3 * C);
      l.wq = io::row_slice(qkv, 0, C), l.wk = io::row_slice(qkv, C, C), l.wv = io::row_slice(qkv, 2 * C, C);
      Tensor bqkv = t.vector(n("attn.c_attn.bias"), 3 * C);
      l.bq = io::vec_slice(bqkv, 0, C), l.bk = io::vec_slice(bqkv, C, C), l.bv = io::vec_slice(bqkv, 2 * C, C);
      l.wo = t.conv1d(n("attn.c_proj.weight"), C, C);
      l.bo = t.vector(n("attn.c_proj.bias"), C);
      l.ffn_norm = t.vector(n("ln_2.weight"), C);
      l.ffn_norm_b = t.vector(n("ln_2.bias"), C);
      l.w1 = t.conv1d(n("mlp.c_fc.weight"), C, H);
      l.b1 = t.vector(n("mlp.c_fc.bias"), H);
      l.w2 = t.conv1d(n("mlp.c_proj.weight"), H, C);
      l.b2 = t.vector(n("mlp.c_proj.bias"), C);
    }
    w.final_norm = t.vector("ln_f.weight", C);
    w.final_norm_b = t.vector("ln_f.bias", C);
    w.classifier = w.tok_emb;
  }

  std::vector<std::pair<std::string, Tensor>> hf_tensors(const ModelWeights& w, ModelWeights& scratch,
                                                         DType dt) const override {
    const ModelConfig& c = w.config;
    std::vector<std::pair<std::string, Tensor>> out;
    auto as_dt = [&](const Tensor& t) { return t.dtype == dt ? t : scratch.copy_as(t, dt); };
    auto conv1d = [&](const Tensor& t) { return io::transposed(scratch, as_dt(t)); };
    out.emplace_back("transformer.wte.weight", io::row_slice(w.tok_emb, 0, c.vocab_size));  // drop llm.c's padding rows
    out.emplace_back("transformer.wpe.weight", w.pos_emb);
    for (int i = 0; i < c.n_layers; i++) {
      const LayerWeights& l = w.layers[size_t(i)];
      auto n = [&](const char* s) { return fmt::format("transformer.h.{}.{}", i, s); };
      out.emplace_back(n("ln_1.weight"), l.attn_norm);
      out.emplace_back(n("ln_1.bias"), l.attn_norm_b);
      out.emplace_back(n("attn.c_attn.weight"), io::transposed(scratch, io::stack_rows(scratch, {&l.wq, &l.wk, &l.wv}, dt)));
      out.emplace_back(n("attn.c_attn.bias"), io::stack_rows(scratch, {&l.bq, &l.bk, &l.bv}, DType::F32));
      out.emplace_back(n("attn.c_proj.weight"), conv1d(l.wo));
      out.emplace_back(n("attn.c_proj.bias"), l.bo);
      out.emplace_back(n("ln_2.weight"), l.ffn_norm);
      out.emplace_back(n("ln_2.bias"), l.ffn_norm_b);
      out.emplace_back(n("mlp.c_fc.weight"), conv1d(l.w1));
      out.emplace_back(n("mlp.c_fc.bias"), l.b1);
      out.emplace_back(n("mlp.c_proj.weight"), conv1d(l.w2));
      out.emplace_back(n("mlp.c_proj.bias"), l.b2);
    }
    out.emplace_back("transformer.ln_f.weight", w.final_norm);
    out.emplace_back("transformer.ln_f.bias", w.final_norm_b);
    return out;
  }

  // c_attn is one fused module for q, k and v.
  std::optional<GgufLayout> gguf() const override {
    GgufLayout g{"gpt2", /*fused_qkv=*/true};
    g.output_when_tied = true;
    return g;
  }

  const PeftLayout& peft() const override {
    static const PeftLayout p = {"transformer.h.",
                                 {"attn.c_attn", "attn.c_attn", "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj",
                                  nullptr},
                                 {"c_attn", "c_attn", "c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj", nullptr},
                                 /*fan_in_fan_out=*/true,
                                 /*permuted_qk=*/false};
    return p;
  }

  void block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n, int pos,
                     KvCache& cache, int layer, const LoraLayerRef* lora) const override {
    gpt2_block_forward(c, l, a, n, pos, cache, layer, lora);
  }

  // The attention backward's two middle kernels are the family-independent ones.
  std::vector<KernelSpec> training_kernels(int slot) const override {
    std::vector<KernelSpec> k = {{"gpt2_fwd_attn", layer_kernel(gpt2_fwd_attn), true},
                                 {"gpt2_fwd_ffn", layer_kernel(gpt2_fwd_ffn), false},
                                 {"gpt2_ffn_bwd", layer_kernel(gpt2_ffn_bwd), false},
                                 {"sdpa_bwd1", layer_kernel(sdpa_bwd1), true},
                                 {"sdpa_bwd2", sdpa_bwd2_kernel(), true, false},
                                 {"gpt2_qkv_bwd", layer_kernel(gpt2_qkv_bwd), true}};
    if (slot > 0) {
      k[kFwdAttn] = {"gpt2_lora_fwd_attn", lora_kernel(gpt2_lora_fwd_attn, slot), true};
      k[kQkvBwd] = {"gpt2_lora_qkv_bwd", lora_kernel(gpt2_lora_qkv_bwd, slot), true};
    }
    return k;
  }

  std::vector<KernelSpec> inference_kernels() const override {
    return {{"gpt2_prefill_attn", layer_kernel(gpt2_prefill_attn), true},
            {"gpt2_prefill_ffn", layer_kernel(gpt2_prefill_ffn), false},
            {"gpt2_decode_qkv", layer_kernel(gpt2_decode_qkv), false},
            {"gpt2_decode_ffn", layer_kernel(gpt2_decode_ffn), false},
            {"final_norm", final_norm_kernel(), false, false}};
  }
  bool ane_inference_kernels() const override { return true; }
};

}  // namespace

const ModelFamily& gpt2_family() {
  static const Gpt2Family f;
  return f;
}

}  // namespace orion
