// Hugging Face checkpoints (model.safetensors + config.json) ⇄ Orion's canonical weights.
//
// Llama (LlamaForCausalLM) — nn.Linear weights are [out, in], like Orion's:
//   model.embed_tokens.weight [V, C]                      → tok_emb
//   model.layers.{i}.input_layernorm.weight [C]          → attn_norm
//   model.layers.{i}.self_attn.q_proj.weight [NH·HS, C]  → wq   (rows permuted for rotate-half RoPE)
//   model.layers.{i}.self_attn.k_proj.weight [NKV·HS, C] → wk   (same permutation, NKV heads)
//   model.layers.{i}.self_attn.v_proj.weight [NKV·HS, C] → wv
//   model.layers.{i}.self_attn.o_proj.weight [C, NH·HS]  → wo
//   model.layers.{i}.post_attention_layernorm.weight [C] → ffn_norm
//   model.layers.{i}.mlp.gate_proj / up_proj [H, C], down_proj [C, H] → w1 / w3, w2
//   model.norm.weight [C] → final_norm;   lm_head.weight [V, C] → classifier (when untied)
// GPT-2 (GPT2LMHeadModel; names with or without the "transformer." prefix) — Conv1D weights are
// stored [in, out], the transpose of Orion's layout:
//   wte.weight [V, C], wpe.weight [T, C]
//   h.{i}.ln_1.weight / .bias [C]
//   h.{i}.attn.c_attn.weight [C, 3C] (columns q | k | v), .bias [3C]
//   h.{i}.attn.c_proj.weight [C, C], .bias [C]
//   h.{i}.ln_2.weight / .bias [C]
//   h.{i}.mlp.c_fc.weight [C, H], .bias [H];  h.{i}.mlp.c_proj.weight [H, C], .bias [C]
//   ln_f.weight / .bias [C];  the classifier is tied to wte
// Matrices that need no rearranging stay views into the mapping in their stored dtype; transposed
// or permuted ones are copied (same dtype); vectors become f32.
#include <filesystem>

#include "base/error.h"
#include "model/io/io_internal.h"

namespace orion::io {
namespace fs = std::filesystem;

namespace {

struct HfPaths {
  std::string weights, config;
};

// The weights file of a folder: model.safetensors, or else the folder's only *.safetensors.
std::string weights_in(const fs::path& dir) {
  fs::path st = dir / "model.safetensors";
  if (file_exists(st.string())) return st.string();
  if (file_exists((dir / "model.safetensors.index.json").string()))
    throw_input_error(dir.string(), "sharded checkpoints (model.safetensors.index.json) are not supported yet", {}, -1,
                      "merge the shards into one model.safetensors");
  std::vector<std::string> found;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec))
    if (e.path().extension() == ".safetensors") found.push_back(e.path().string());
  if (found.size() == 1) return found[0];
  throw_input_error(dir.string(), found.empty() ? "no model.safetensors in this folder"
                                                : "several *.safetensors files and no model.safetensors", {}, -1,
                    "pass the path of the .safetensors file to read");
}

HfPaths resolve(const std::string& path) {
  fs::path p(path);
  if (is_directory(path)) return {weights_in(p), (p / "config.json").string()};
  if (p.filename() == "config.json") return {weights_in(p.parent_path()), path};
  return {path, (p.parent_path() / "config.json").string()};
}

// Looks tensors up by name with clear errors, and turns them into canonical tensors.
class Tensors {
 public:
  Tensors(const SafetensorsFile& f, ModelWeights& w) : f_(f), w_(w) {}
  std::string prefix;

  bool has(const std::string& name) const { return f_.find(prefix + name) != nullptr; }
  const SafetensorsEntry& get(const std::string& name, std::vector<int64_t> shape) const {
    const SafetensorsEntry* e = f_.find(prefix + name);
    if (!e)
      throw_input_error(f_.path(), "tensor is missing", prefix + name, -1,
                        "the checkpoint is incomplete or does not match config.json's model_type");
    if (!e->dtype)
      throw_input_error(f_.path(), fmt::format("dtype {} is not supported (Orion reads F32, F16 and BF16)", e->dtype_name),
                        e->name, int64_t(e->file_offset), "convert the checkpoint to float32, float16 or bfloat16");
    if (e->shape != shape)
      throw_input_error(f_.path(),
                        fmt::format("has shape [{}], config.json implies [{}]", fmt::join(e->shape, ", "), fmt::join(shape, ", ")),
                        e->name, int64_t(e->file_offset), "config.json does not belong to these weights");
    return *e;
  }
  Tensor matrix(const std::string& name, int64_t rows, int64_t cols) {
    const SafetensorsEntry& e = get(name, {rows, cols});
    return view_or_copy(w_, e.data, *e.dtype, {rows, cols});
  }
  // A Conv1D weight stored [in, out], returned as Orion's [out, in].
  Tensor conv1d(const std::string& name, int64_t in, int64_t out) { return transposed(w_, matrix(name, in, out)); }
  Tensor vector(const std::string& name, int64_t n) {
    const SafetensorsEntry& e = get(name, {n});
    return vector_f32(w_, e.data, *e.dtype, n);
  }

 private:
  const SafetensorsFile& f_;
  ModelWeights& w_;
};

void read_llama(Tensors& t, ModelWeights& w) {
  const ModelConfig& c = w.config;
  const int64_t C = c.dim, H = c.hidden_dim, V = c.vocab_size, Q = int64_t(c.n_heads) * c.head_dim(), KV = c.kv_dim();
  w.tok_emb = t.matrix("model.embed_tokens.weight", V, C);
  for (int i = 0; i < c.n_layers; i++) {
    LayerWeights& l = w.layers[size_t(i)];
    auto n = [&](const char* s) { return fmt::format("model.layers.{}.{}", i, s); };
    l.attn_norm = t.vector(n("input_layernorm.weight"), C);
    l.wq = hf_unpermute_rows(w, t.matrix(n("self_attn.q_proj.weight"), Q, C), c.n_heads);
    l.wk = hf_unpermute_rows(w, t.matrix(n("self_attn.k_proj.weight"), KV, C), c.n_kv_heads);
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

void read_gpt2(Tensors& t, ModelWeights& w) {
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
    l.wq = row_slice(qkv, 0, C), l.wk = row_slice(qkv, C, C), l.wv = row_slice(qkv, 2 * C, C);
    Tensor bqkv = t.vector(n("attn.c_attn.bias"), 3 * C);
    l.bq = vec_slice(bqkv, 0, C), l.bk = vec_slice(bqkv, C, C), l.bv = vec_slice(bqkv, 2 * C, C);
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

// Several same-width matrices (or vectors) stacked along their first dimension into one new
// tensor of dtype dt: [Σ rows, cols] (or [Σ n]).
Tensor stack_rows(ModelWeights& scratch, const std::vector<const Tensor*>& parts, DType dt) {
  std::vector<int64_t> shape = parts[0]->shape;
  shape[0] = 0;
  for (auto* p : parts) shape[0] += p->shape[0];
  void* dst;
  Tensor out = scratch.alloc_tensor(shape, dt, &dst);
  uint8_t* at = static_cast<uint8_t*>(dst);
  for (auto* p : parts) {
    convert_dtype(p->data, p->dtype, at, dt, size_t(p->numel()));
    at += size_t(p->numel()) * dtype_size(dt);
  }
  return out;
}

// The tensors of a Hugging Face checkpoint of `w`. Rearranged copies live in `scratch`.
std::vector<std::pair<std::string, Tensor>> hf_tensors(const ModelWeights& w, ModelWeights& scratch, DType dt) {
  const ModelConfig& c = w.config;
  std::vector<std::pair<std::string, Tensor>> out;
  auto as_dt = [&](const Tensor& t) { return t.dtype == dt ? t : scratch.copy_as(t, dt); };
  auto conv1d = [&](const Tensor& t) { return transposed(scratch, as_dt(t)); };
  Tensor tok = row_slice(w.tok_emb, 0, c.vocab_size);  // drop llm.c's padding rows
  if (c.arch == Arch::Llama) {
    out.emplace_back("model.embed_tokens.weight", tok);
    for (int i = 0; i < c.n_layers; i++) {
      const LayerWeights& l = w.layers[size_t(i)];
      auto n = [&](const char* s) { return fmt::format("model.layers.{}.{}", i, s); };
      out.emplace_back(n("input_layernorm.weight"), l.attn_norm);
      out.emplace_back(n("self_attn.q_proj.weight"), hf_permute_rows(scratch, l.wq, c.n_heads));
      out.emplace_back(n("self_attn.k_proj.weight"), hf_permute_rows(scratch, l.wk, c.n_kv_heads));
      out.emplace_back(n("self_attn.v_proj.weight"), l.wv);
      out.emplace_back(n("self_attn.o_proj.weight"), l.wo);
      out.emplace_back(n("post_attention_layernorm.weight"), l.ffn_norm);
      out.emplace_back(n("mlp.gate_proj.weight"), l.w1);
      out.emplace_back(n("mlp.up_proj.weight"), l.w3);
      out.emplace_back(n("mlp.down_proj.weight"), l.w2);
    }
    out.emplace_back("model.norm.weight", w.final_norm);
    if (!c.tied_embeddings) out.emplace_back("lm_head.weight", row_slice(w.classifier, 0, c.vocab_size));
    return out;
  }
  out.emplace_back("transformer.wte.weight", tok);
  out.emplace_back("transformer.wpe.weight", w.pos_emb);
  for (int i = 0; i < c.n_layers; i++) {
    const LayerWeights& l = w.layers[size_t(i)];
    auto n = [&](const char* s) { return fmt::format("transformer.h.{}.{}", i, s); };
    out.emplace_back(n("ln_1.weight"), l.attn_norm);
    out.emplace_back(n("ln_1.bias"), l.attn_norm_b);
    out.emplace_back(n("attn.c_attn.weight"), transposed(scratch, stack_rows(scratch, {&l.wq, &l.wk, &l.wv}, dt)));
    out.emplace_back(n("attn.c_attn.bias"), stack_rows(scratch, {&l.bq, &l.bk, &l.bv}, DType::F32));
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

}  // namespace

ModelWeights read_hf(const std::string& path) {
  HfPaths p = resolve(path);
  ModelConfig c = read_hf_config(p.config);
  SafetensorsFile f = SafetensorsFile::open(p.weights);
  ModelWeights w;
  w.config = c;
  w.keep(f.mapping());
  w.layers.resize(size_t(c.n_layers));
  Tensors t(f, w);
  if (c.arch == Arch::Llama)
    read_llama(t, w);
  else
    read_gpt2(t, w);
  return w;
}

void write_hf(const ModelWeights& w, const std::string& path, std::optional<DType> dtype) {
  const DType dt = dtype.value_or(w.matrix_dtype());
  std::string weights_path, config_path;
  if (path.size() > 12 && path.ends_with(".safetensors")) {
    weights_path = path;
    config_path = (fs::path(path).parent_path() / "config.json").string();
  } else {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) throw_runtime_error(fmt::format("cannot create folder: {}", ec.message()), path);
    weights_path = (fs::path(path) / "model.safetensors").string();
    config_path = (fs::path(path) / "config.json").string();
  }
  ModelWeights scratch;
  auto named = hf_tensors(w, scratch, dt);
  std::vector<SafetensorsOut> outs;
  // Matrices in the requested dtype; vectors stay f32 so that they round-trip exactly.
  for (auto& [name, t] : named) outs.push_back({name, &t, t.shape.size() == 2 ? dt : DType::F32});
  write_safetensors(weights_path, outs, {{"format", "pt"}});
  std::string config = hf_config_json(w.config, dt);
  write_file_atomic(config_path, [&](FileWriter& out) { out.write_str(config); });
}

}  // namespace orion::io
