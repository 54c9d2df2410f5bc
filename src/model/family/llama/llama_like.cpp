// What Llama, Qwen2, Qwen3 and Mistral share (llama_like.h): config.json fields, the checkpoint's
// tensor names, PEFT modules, the CPU block and the ANE kernel tables.
//   Hugging Face tensors (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM):
//     model.embed_tokens.weight [V, C]                      → tok_emb
//     model.layers.{i}.input_layernorm.weight [C]          → attn_norm
//     model.layers.{i}.self_attn.q_proj.weight [NH·HS, C]  → wq   (rows permuted for rotate-half RoPE)
//     model.layers.{i}.self_attn.k_proj.weight [NKV·HS, C] → wk   (same permutation, NKV heads)
//     model.layers.{i}.self_attn.v_proj.weight [NKV·HS, C] → wv
//     model.layers.{i}.self_attn.{q,k,v}_proj.bias         → bq bk bv   (qkv_bias; bq, bk permuted too)
//     model.layers.{i}.self_attn.{q,k}_norm.weight [HS]    → q_norm k_norm (qk_norm; permuted as one head)
//     model.layers.{i}.self_attn.o_proj.weight [C, NH·HS]  → wo
//     model.layers.{i}.post_attention_layernorm.weight [C] → ffn_norm
//     model.layers.{i}.mlp.gate_proj / up_proj [H, C], down_proj [C, H] → w1 / w3, w2
//     model.norm.weight [C] → final_norm;   lm_head.weight [V, C] → classifier (when untied)
#include "model/family/llama/llama_like.h"

#include "model/family/llama/llama.h"
#include "model/frontends/lora_frontends.h"
#include "model/io/io_internal.h"

namespace orion {

using nlohmann::json;
using namespace frontends;

namespace {

// rope_scaling: absent, null or "default" → none; "llama3" → its four numbers; anything else is
// refused by name (yarn, dynamic, linear, longrope … compute other frequencies).
RopeScaling read_rope_scaling(const io::HfConfigReader& r) {
  if (!r.has("rope_scaling")) return {};
  const io::HfConfigReader s = r.object("rope_scaling");
  const char* key = s.has("rope_type") ? "rope_type" : "type";  // "type": the older spelling
  const std::string type = s.string_or(key, "");
  if (type == "default") return {};
  if (type != "llama3")
    s.fail(key, type.empty() ? "is missing" : fmt::format("\"{}\" is not supported (supported: llama3, none)", type));
  RopeScaling rs;
  rs.kind = RopeScaling::Kind::Llama3;
  rs.factor = s.positive_float("factor", std::nullopt);
  rs.low_freq_factor = s.positive_float("low_freq_factor", std::nullopt);
  rs.high_freq_factor = s.positive_float("high_freq_factor", std::nullopt);
  rs.original_max_positions = s.positive_int("original_max_position_embeddings");
  return rs;
}

// Options of LlamaConfig-like configs that change the block into something Orion does not run.
void refuse_unsupported(const io::HfConfigReader& r) {
  if (r.boolean_or("attention_bias", false))
    r.fail("attention_bias", "true is not supported (biases on q, k, v and o; Orion runs this family without them)");
  if (r.boolean_or("mlp_bias", false)) r.fail("mlp_bias", "true is not supported (Orion's SwiGLU has no biases)");
  for (const char* experts : {"num_experts", "num_local_experts"})
    if (r.count_or(experts, 0) > 0)
      r.fail(experts, fmt::format("{} experts: mixture-of-experts models are not supported", r.count_or(experts, 0)));
  const std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") r.fail("hidden_act", fmt::format("\"{}\" is not supported (supported: silu)", act));
}

}  // namespace

ModelConfig LlamaLikeFamily::read_hf_config(const io::HfConfigReader& r) const {
  refuse_unsupported(r);
  ModelConfig c;
  c.arch = id();
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
  c.rope_scaling = read_rope_scaling(r);
  // An explicit head size is kept only when it differs from C / NH, so that a config stating the
  // implied one (Llama 3.2's head_dim 64) is the plain model.
  const int hs = r.positive_int_or("head_dim", default_head_dim());
  if (hs > 0 && (c.dim % c.n_heads != 0 || hs != c.dim / c.n_heads)) c.head_size = hs;
  read_hf_extras(r, c);
  return c;
}

json LlamaLikeFamily::hf_config_json(const ModelConfig& c) const {
  json j = {{"architectures", json::array({hf_architecture()})},
            {"model_type", hf_model_type()},
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
  if (c.head_size > 0 || default_head_dim() > 0) j["head_dim"] = c.head_dim();
  if (c.rope_scaling.kind == RopeScaling::Kind::Llama3) {
    const RopeScaling& s = c.rope_scaling;
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", io::json_float(s.factor)},
                         {"low_freq_factor", io::json_float(s.low_freq_factor)},
                         {"high_freq_factor", io::json_float(s.high_freq_factor)},
                         {"original_max_position_embeddings", s.original_max_positions}};
  }
  add_hf_config(c, j);
  return j;
}

void LlamaLikeFamily::read_hf_tensors(io::HfTensorReader& t, ModelWeights& w) const {
  const ModelConfig& c = w.config;
  const Anatomy a = anatomy();
  const int64_t C = c.dim, H = c.hidden_dim, V = c.vocab_size, HS = c.head_dim(), Q = int64_t(c.n_heads) * HS,
                KV = c.kv_dim();
  w.tok_emb = t.matrix("model.embed_tokens.weight", V, C);
  for (int i = 0; i < c.n_layers; i++) {
    LayerWeights& l = w.layers[size_t(i)];
    auto n = [&](const char* s) { return fmt::format("model.layers.{}.{}", i, s); };
    l.attn_norm = t.vector(n("input_layernorm.weight"), C);
    l.wq = io::hf_unpermute_rows(w, t.matrix(n("self_attn.q_proj.weight"), Q, C), c.n_heads);
    l.wk = io::hf_unpermute_rows(w, t.matrix(n("self_attn.k_proj.weight"), KV, C), c.n_kv_heads);
    l.wv = t.matrix(n("self_attn.v_proj.weight"), KV, C);
    if (a.qkv_bias) {
      l.bq = io::hf_unpermute_vector(w, t.vector(n("self_attn.q_proj.bias"), Q), c.n_heads);
      l.bk = io::hf_unpermute_vector(w, t.vector(n("self_attn.k_proj.bias"), KV), c.n_kv_heads);
      l.bv = t.vector(n("self_attn.v_proj.bias"), KV);
    }
    if (a.qk_norm) {
      l.q_norm = io::hf_unpermute_vector(w, t.vector(n("self_attn.q_norm.weight"), HS), 1);
      l.k_norm = io::hf_unpermute_vector(w, t.vector(n("self_attn.k_norm.weight"), HS), 1);
    }
    l.wo = t.matrix(n("self_attn.o_proj.weight"), C, Q);
    l.ffn_norm = t.vector(n("post_attention_layernorm.weight"), C);
    l.w1 = t.matrix(n("mlp.gate_proj.weight"), H, C);
    l.w3 = t.matrix(n("mlp.up_proj.weight"), H, C);
    l.w2 = t.matrix(n("mlp.down_proj.weight"), C, H);
  }
  w.final_norm = t.vector("model.norm.weight", C);
  w.classifier = c.tied_embeddings ? w.tok_emb : t.matrix("lm_head.weight", V, C);
}

std::vector<std::pair<std::string, Tensor>> LlamaLikeFamily::hf_tensors(const ModelWeights& w, ModelWeights& scratch,
                                                                        DType) const {
  const ModelConfig& c = w.config;
  const Anatomy a = anatomy();
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("model.embed_tokens.weight", io::row_slice(w.tok_emb, 0, c.vocab_size));
  for (int i = 0; i < c.n_layers; i++) {
    const LayerWeights& l = w.layers[size_t(i)];
    auto n = [&](const char* s) { return fmt::format("model.layers.{}.{}", i, s); };
    out.emplace_back(n("input_layernorm.weight"), l.attn_norm);
    out.emplace_back(n("self_attn.q_proj.weight"), io::hf_permute_rows(scratch, l.wq, c.n_heads));
    out.emplace_back(n("self_attn.k_proj.weight"), io::hf_permute_rows(scratch, l.wk, c.n_kv_heads));
    out.emplace_back(n("self_attn.v_proj.weight"), l.wv);
    if (a.qkv_bias) {
      out.emplace_back(n("self_attn.q_proj.bias"), io::hf_permute_vector(scratch, l.bq, c.n_heads));
      out.emplace_back(n("self_attn.k_proj.bias"), io::hf_permute_vector(scratch, l.bk, c.n_kv_heads));
      out.emplace_back(n("self_attn.v_proj.bias"), l.bv);
    }
    if (a.qk_norm) {
      out.emplace_back(n("self_attn.q_norm.weight"), io::hf_permute_vector(scratch, l.q_norm, 1));
      out.emplace_back(n("self_attn.k_norm.weight"), io::hf_permute_vector(scratch, l.k_norm, 1));
    }
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

const PeftLayout& LlamaLikeFamily::peft() const {
  static const PeftLayout p = {"model.layers.",
                               {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                "mlp.gate_proj", "mlp.down_proj", "mlp.up_proj"},
                               {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "down_proj", "up_proj"},
                               /*fan_in_fan_out=*/false,
                               /*permuted_qk=*/true};
  return p;
}

void LlamaLikeFamily::block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n,
                                    int pos, KvCache& cache, int layer, const LoraLayerRef* lora) const {
  llama_block_forward(c, l, a, n, pos, cache, layer, lora);
}

// The attention backward's two middle kernels (sdpa_bwd1, sdpa_bwd2) serve every family.
std::vector<KernelSpec> LlamaLikeFamily::training_kernels(int slot) const {
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
std::vector<KernelSpec> LlamaLikeFamily::inference_kernels() const {
  return {{"llama_fwd_attn", layer_kernel(llama_fwd_attn), true},
          {"llama_fwd_ffn", layer_kernel(llama_fwd_ffn), false},
          {"llama_fwd_attn", layer_kernel(llama_fwd_attn), true},
          {"llama_fwd_ffn", layer_kernel(llama_fwd_ffn), false},
          {"final_norm", final_norm_kernel(), false, false}};
}

}  // namespace orion
