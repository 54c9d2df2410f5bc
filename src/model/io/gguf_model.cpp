// GGUF files (llama.cpp) ⇄ Orion's canonical weights. llama.cpp names tensors and config keys the
// same way for every architecture, so one table serves every family; what differs per family is in
// its GgufLayout (model/family/family.h: the general.architecture name, a fused qkv tensor) and its
// Anatomy (which norms, biases and feed-forward matrices exist).
//
//   canonical            GGUF tensor                     canonical     GGUF tensor
//   tok_emb [V, C]       token_embd.weight               wq wk wv      blk.N.attn_q / attn_k / attn_v
//   pos_emb [T, C]       position_embd.weight            (GPT-2)       blk.N.attn_qkv (q, k, v rows)
//   final_norm(_b)       output_norm.weight (.bias)      wo            blk.N.attn_output
//   classifier           output.weight (absent or a      attn_norm     blk.N.attn_norm, ffn_norm
//                        copy of token_embd: tied)
//   gated FFN: w1 gate → ffn_gate, w3 up → ffn_up, w2 → ffn_down; plain FFN: w1 → ffn_up, w2 → ffn_down
// Biases are the same names with ".bias"; Qwen2's q/k/v biases are attn_q.bias, attn_k.bias,
// attn_v.bias, Qwen3's per-head q/k norms attn_q_norm.weight, attn_k_norm.weight [HS], Llama 3's RoPE
// scaling rope_freqs.weight (gguf_rope.cpp). Keys: <arch>.attention.key_length = HS when it is not
// C/NH, <arch>.attention.sliding_window (Mistral, written as "llama"; llama.cpp has no window there).
// q/k order: llama.cpp's converter permutes "llama" q/k rows into the interleaved-pair RoPE order,
// Orion's canonical one, so they are read as they are; for qwen2 and qwen3, which llama.cpp runs
// with NEOX (rotate-half) RoPE, it keeps Hugging Face's order, so Orion permutes them (and the q/k
// biases and norm gains, which follow the rows) on the way in and out (GgufLayout::rotate_half_qk).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <set>

#include "base/error.h"
#include "model/family/family.h"
#include "model/io/gguf_file.h"
#include "model/io/io_internal.h"

namespace orion::io {
using json = nlohmann::json;

namespace {

// A layer tensor's GGUF name (without "blk.N.") and where it goes, for the layers of an anatomy.
struct LayerSlot {
  std::string name;
  Tensor LayerWeights::*field;
  bool vector;
};

std::vector<LayerSlot> layer_slots(const Anatomy& a, bool fused_qkv) {
  std::vector<LayerSlot> s;
  auto matrix = [&](const char* name, Tensor LayerWeights::*f, Tensor LayerWeights::*bias) {
    s.push_back({std::string(name) + ".weight", f, false});
    if (a.biases) s.push_back({std::string(name) + ".bias", bias, true});
  };
  s.push_back({"attn_norm.weight", &LayerWeights::attn_norm, true});
  if (a.norm == NormKind::LayerNorm) s.push_back({"attn_norm.bias", &LayerWeights::attn_norm_b, true});
  if (!fused_qkv) {
    matrix("attn_q", &LayerWeights::wq, &LayerWeights::bq);
    matrix("attn_k", &LayerWeights::wk, &LayerWeights::bk);
    matrix("attn_v", &LayerWeights::wv, &LayerWeights::bv);
  }
  if (a.qkv_bias)
    for (auto [name, field] : {std::pair{"attn_q.bias", &LayerWeights::bq}, {"attn_k.bias", &LayerWeights::bk},
                               {"attn_v.bias", &LayerWeights::bv}})
      s.push_back({name, field, true});
  if (a.qk_norm) {
    s.push_back({"attn_q_norm.weight", &LayerWeights::q_norm, true});
    s.push_back({"attn_k_norm.weight", &LayerWeights::k_norm, true});
  }
  matrix("attn_output", &LayerWeights::wo, &LayerWeights::bo);
  s.push_back({"ffn_norm.weight", &LayerWeights::ffn_norm, true});
  if (a.norm == NormKind::LayerNorm) s.push_back({"ffn_norm.bias", &LayerWeights::ffn_norm_b, true});
  if (a.gated_ffn) {
    s.push_back({"ffn_gate.weight", &LayerWeights::w1, false});
    s.push_back({"ffn_up.weight", &LayerWeights::w3, false});
  } else {
    matrix("ffn_up", &LayerWeights::w1, &LayerWeights::b1);
  }
  matrix("ffn_down", &LayerWeights::w2, &LayerWeights::b2);
  return s;
}

const ModelFamily& family_of_arch(const GgufFile& f) {
  const GgufValue* v = f.find_value("general.architecture");
  if (!v || v->type != GgufValueType::String)
    throw_input_error(f.path(), "no general.architecture string", "general.architecture",
                      -1, "this GGUF file does not say what model it holds");
  const std::string arch = v->value.get<std::string>();
  std::vector<std::string> known;
  for (const ModelFamily* fam : model_families())
    if (auto g = fam->gguf(); g && !g->windowed) {
      if (arch == g->arch) return *fam;
      known.push_back(g->arch);
    }
  throw_input_error(f.path(), fmt::format("architecture \"{}\" is not one Orion runs from GGUF (it runs: {})", arch,
                                          fmt::join(known, ", ")),
                    "general.architecture");
}

// A metadata value as text for a message (strings in a file need not be valid UTF-8).
std::string shown(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

// Typed metadata reads: any integer type for counts, f32 or f64 for floats.
class GgufConfigReader {
 public:
  GgufConfigReader(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}
  const GgufValue* find(const std::string& key) const { return f_.find_value(arch_ + "." + key); }
  int positive_int(const std::string& key, std::optional<int> fallback = {}) const {
    const GgufValue* v = find(key);
    if (!v && fallback) return *fallback;
    const std::string field = arch_ + "." + key;
    if (!v) throw_input_error(f_.path(), "missing", field, -1, "the file lacks a key every model of this architecture has");
    if (!v->value.is_number_integer() || v->value.get<int64_t>() <= 0 || v->value.get<int64_t>() > (1 << 30))
      throw_input_error(f_.path(), fmt::format("expected a positive integer, found {}", shown(v->value)), field);
    return int(v->value.get<int64_t>());
  }
  [[noreturn]] void refuse(const std::string& key, const std::string& feature) const {
    throw_input_error(f_.path(), fmt::format("{} is not supported in GGUF files yet", feature), arch_ + "." + key, -1,
                      "convert the original checkpoint (safetensors), which Orion reads with this feature");
  }
  float positive_float(const std::string& key, std::optional<float> fallback) const {
    const GgufValue* v = find(key);
    if (!v && fallback) return *fallback;
    const std::string field = arch_ + "." + key;
    if (!v) throw_input_error(f_.path(), "missing", field);
    if (!v->value.is_number() || !(v->value.get<double>() > 0) || !std::isfinite(v->value.get<float>()))
      throw_input_error(f_.path(), fmt::format("expected a positive finite number, found {}", shown(v->value)), field);
    return v->value.get<float>();
  }

 private:
  const GgufFile& f_;
  std::string arch_;
};

const GgufTensor& tensor(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.find(name);
  if (!t) throw_input_error(f.path(), "tensor missing", name, -1, "the file is not a complete model of its architecture");
  if (!t->dtype)
    throw_input_error(f.path(), fmt::format("tensor type {} is not supported (Orion reads F32, F16, BF16 and Q8_0)",
                                            ggml_type_name(t->ggml_type)),
                      name, int64_t(t->file_offset), "convert the model to f16 or bf16 with llama.cpp first");
  return *t;
}

// The tensors a reader has taken, so that anything else in the file is refused rather than ignored.
using Taken = std::set<std::string>;

Tensor read_tensor(const GgufFile& f, ModelWeights& w, const std::string& name, bool vector, Taken& taken) {
  const GgufTensor& t = tensor(f, name);
  taken.insert(name);
  if (vector != (t.shape.size() == 1))
    throw_input_error(f.path(), fmt::format("expected a {} tensor, found {} dimensions", vector ? "1-D" : "2-D", t.shape.size()),
                      name);
  return vector ? vector_f32(w, t.data, *t.dtype, t.shape[0]) : view_or_copy(w, t.data, *t.dtype, t.shape);
}

// The keys that change a Llama-like block: its head size, its RoPE, a sliding window (the windowed
// family of the arch: Mistral for "llama"). What the families cannot run is refused by name.
void read_block_features(const ModelFamily& fam, const GgufConfigReader& r, ModelConfig& c) {
  if (r.find("attention.key_length")) {
    const int hs = r.positive_int("attention.key_length");
    if (int64_t(hs) * c.n_heads != c.dim) {
      if (fam.anatomy().positions != Positions::Rope) r.refuse("attention.key_length", "a head size other than C / NH in GPT-2");
      c.head_size = hs;
    }
  }
  if (r.find("attention.value_length") && r.positive_int("attention.value_length") != c.head_dim())
    r.refuse("attention.value_length", "a value head size other than the key head size");
  if (r.find("rope.dimension_count") && r.positive_int("rope.dimension_count") != c.head_dim())
    r.refuse("rope.dimension_count", "RoPE on part of each head");
  if (const GgufValue* v = r.find("rope.scaling.type"); v && v->value != "none")
    r.refuse("rope.scaling.type", "RoPE scaling " + shown(v->value));
  if (!r.find("attention.sliding_window")) return;
  for (const ModelFamily* w : model_families())
    if (auto g = w->gguf(); g && g->windowed && std::string(g->arch) == fam.gguf()->arch) {
      c.arch = w->id();
      c.sliding_window = r.positive_int("attention.sliding_window");
      return;
    }
  r.refuse("attention.sliding_window", fmt::format("sliding-window attention in {} models", fam.display_name()));
}

// The classifier is the embedding (tied) when the file has no output.weight, or one that is a copy
// of token_embd.weight — same type, shape and bytes — as llama.cpp's converter writes GPT-2's wte.
bool output_is_embedding(const GgufFile& f) {
  const GgufTensor* out = f.find("output.weight");
  const GgufTensor* emb = f.find("token_embd.weight");
  if (!out) return true;
  return emb && out->ggml_type == emb->ggml_type && out->shape == emb->shape && out->nbytes == emb->nbytes &&
         std::memcmp(out->data, emb->data, out->nbytes) == 0;
}

ModelConfig read_config(const GgufFile& f, const ModelFamily& fam) {
  const Anatomy a = fam.anatomy();
  GgufConfigReader r(f, fam.gguf()->arch);
  ModelConfig c;
  c.arch = fam.id();
  c.dim = r.positive_int("embedding_length");
  c.n_layers = r.positive_int("block_count");
  c.hidden_dim = r.positive_int("feed_forward_length");
  c.n_heads = r.positive_int("attention.head_count");
  c.n_kv_heads = r.positive_int("attention.head_count_kv", c.n_heads);
  c.seq_len = r.positive_int("context_length");
  c.norm_eps = r.positive_float(a.norm == NormKind::RMSNorm ? "attention.layer_norm_rms_epsilon"
                                                             : "attention.layer_norm_epsilon",
                                1e-5f);
  if (a.positions == Positions::Rope) c.rope_theta = r.positive_float("rope.freq_base", 10000.0f);
  read_block_features(fam, r, c);
  const GgufTensor& emb = tensor(f, "token_embd.weight");
  c.vocab_size = int(emb.shape[0]);
  if (r.find("vocab_size") && r.positive_int("vocab_size") != c.vocab_size)
    throw_input_error(f.path(), fmt::format("says {} tokens but token_embd.weight has {} rows", r.positive_int("vocab_size"),
                                            c.vocab_size),
                      std::string(fam.gguf()->arch) + ".vocab_size");
  c.padded_vocab = c.vocab_size;
  c.tied_embeddings = output_is_embedding(f);
  c.validate(f.path());
  return c;
}

// Orion's interleaved q/k order ⇄ the rotate-half order of a rotate_half_qk file: the rows of wq
// and wk, the q/k biases and the per-head norm gains (new tensors owned by `owner`).
void reorder_qk(ModelWeights& owner, LayerWeights& l, const ModelConfig& c, bool to_file) {
  auto rows = to_file ? hf_permute_rows : hf_unpermute_rows;
  auto vec = to_file ? hf_permute_vector : hf_unpermute_vector;
  l.wq = rows(owner, l.wq, c.n_heads), l.wk = rows(owner, l.wk, c.n_kv_heads);
  if (!l.bq.empty()) l.bq = vec(owner, l.bq, c.n_heads), l.bk = vec(owner, l.bk, c.n_kv_heads);
  if (!l.q_norm.empty()) l.q_norm = vec(owner, l.q_norm, 1), l.k_norm = vec(owner, l.k_norm, 1);
}

// Before q/k rows are moved head by head, their shapes must be the config's (ModelWeights::validate
// checks every other tensor after reading).
void check_qk_shapes(const GgufFile& f, const std::string& blk, const LayerWeights& l, const ModelConfig& c) {
  const int64_t C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS, KV = c.kv_dim();
  const std::pair<const char*, std::pair<const Tensor*, std::vector<int64_t>>> expected[] = {
      {"attn_q.weight", {&l.wq, {Q, C}}}, {"attn_k.weight", {&l.wk, {KV, C}}},      {"attn_q.bias", {&l.bq, {Q}}},
      {"attn_k.bias", {&l.bk, {KV}}},     {"attn_q_norm.weight", {&l.q_norm, {HS}}}, {"attn_k_norm.weight", {&l.k_norm, {HS}}}};
  for (const auto& [name, want] : expected)
    if (!want.first->empty() && want.first->shape != want.second)
      throw_input_error(f.path(), fmt::format("shape [{}], expected [{}]", fmt::join(want.first->shape, ", "),
                                              fmt::join(want.second, ", ")),
                        blk + name, -1, "the file is not a complete model of its architecture");
}

// Llama 3's scaling from rope_freqs.weight, when the file has it.
void read_rope_divisors(const GgufFile& f, ModelConfig& c, Taken& taken) {
  const GgufTensor* t = f.find("rope_freqs.weight");
  if (!t || model_family(c.arch).anatomy().positions != Positions::Rope) return;
  tensor(f, t->name);  // a type Orion reads
  taken.insert(t->name);
  if (t->shape.size() != 1) throw_input_error(f.path(), "expected a 1-D tensor", t->name, int64_t(t->file_offset));
  std::vector<float> d(size_t(t->shape[0]));
  convert_dtype(t->data, *t->dtype, d.data(), DType::F32, d.size());
  c.rope_scaling = llama3_scaling_from_divisors(c, d, f.path(), t->name);
}

}  // namespace

ModelWeights read_gguf(const std::string& path) {
  GgufFile f = GgufFile::open(path, GgufArrays::Skip);  // the tokenizer's arrays are the tokenizer reader's
  ModelWeights w;
  w.config = read_config(f, family_of_arch(f));
  const ModelFamily& fam = model_family(w.config.arch);  // Mistral for a windowed "llama" file
  w.keep(f.mapping());
  const ModelConfig& c = w.config;
  Taken taken;
  read_rope_divisors(f, w.config, taken);
  w.tok_emb = read_tensor(f, w, "token_embd.weight", false, taken);
  if (fam.anatomy().positions == Positions::Learned) w.pos_emb = read_tensor(f, w, "position_embd.weight", false, taken);
  const GgufLayout layout = *fam.gguf();
  const std::vector<LayerSlot> slots = layer_slots(fam.anatomy(), layout.fused_qkv);
  w.layers.resize(size_t(c.n_layers));
  for (int i = 0; i < c.n_layers; i++) {
    LayerWeights& l = w.layers[size_t(i)];
    const std::string blk = fmt::format("blk.{}.", i);
    for (const LayerSlot& s : slots) l.*s.field = read_tensor(f, w, blk + s.name, s.vector, taken);
    if (layout.rotate_half_qk) {
      check_qk_shapes(f, blk, l, c);
      reorder_qk(w, l, c, /*to_file=*/false);
    }
    if (!layout.fused_qkv) continue;
    // attn_qkv [NH·HS + 2·NKV·HS, C]: q rows, then k, then v — views into one tensor.
    const int64_t q = int64_t(c.n_heads) * c.head_dim(), kv = c.kv_dim();
    Tensor qkv = read_tensor(f, w, blk + "attn_qkv.weight", false, taken);
    if (qkv.shape[0] != q + 2 * kv)
      throw_input_error(path, fmt::format("expected {} rows (q, k, v), found {}", q + 2 * kv, qkv.shape[0]),
                        blk + "attn_qkv.weight");
    l.wq = row_slice(qkv, 0, q), l.wk = row_slice(qkv, q, kv), l.wv = row_slice(qkv, q + kv, kv);
    if (!fam.anatomy().biases) continue;
    Tensor b = read_tensor(f, w, blk + "attn_qkv.bias", true, taken);
    if (b.shape[0] != q + 2 * kv)
      throw_input_error(path, fmt::format("expected {} elements, found {}", q + 2 * kv, b.shape[0]), blk + "attn_qkv.bias");
    l.bq = vec_slice(b, 0, q), l.bk = vec_slice(b, q, kv), l.bv = vec_slice(b, q + kv, kv);
  }
  w.final_norm = read_tensor(f, w, "output_norm.weight", true, taken);
  if (fam.anatomy().norm == NormKind::LayerNorm) w.final_norm_b = read_tensor(f, w, "output_norm.bias", true, taken);
  w.classifier = c.tied_embeddings ? w.tok_emb : read_tensor(f, w, "output.weight", false, taken);
  if (c.tied_embeddings) taken.insert("output.weight");  // if present: token_embd's copy
  // A tensor the family's block does not use (q/k norms or biases of another architecture) would
  // change the numbers: refuse it instead of computing without it.
  for (const GgufTensor& t : f.tensors())
    if (!taken.count(t.name))
      throw_input_error(path, fmt::format("a {} model read from GGUF has no tensor of this name; Orion does not know what it does",
                                          fam.display_name()),
                        t.name, int64_t(t.file_offset), "convert the original checkpoint (safetensors) instead");
  return w;
}

namespace {

GgufOutValue u32_value(const std::string& key, int64_t v) { return {key, {GgufValueType::U32, {}, json(v)}}; }
GgufOutValue f32_value(const std::string& key, float v) { return {key, {GgufValueType::F32, {}, json(v)}}; }
GgufOutValue string_value(const std::string& key, const std::string& v) { return {key, {GgufValueType::String, {}, v}}; }

// llama.cpp's general.file_type: the dtype most tensors have (LLAMA_FTYPE_ALL_F32, MOSTLY_F16,
// MOSTLY_Q8_0, MOSTLY_BF16).
int64_t file_type(DType dt) {
  switch (dt) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q8_0: return 7;
    case DType::BF16: return 32;
  }
  return 0;
}

// The model's keys: llama.cpp's for its dimensions, plus what its block has beyond the plain one.
std::vector<GgufOutValue> model_metadata(const ModelConfig& c, const Anatomy& a, const std::string& arch, DType dt) {
  std::vector<GgufOutValue> meta = {
      string_value("general.architecture", arch),
      string_value("general.name", "orion"),
      u32_value("general.file_type", file_type(dt)),
      u32_value(arch + ".context_length", c.seq_len),
      u32_value(arch + ".embedding_length", c.dim),
      u32_value(arch + ".block_count", c.n_layers),
      u32_value(arch + ".feed_forward_length", c.hidden_dim),
      u32_value(arch + ".attention.head_count", c.n_heads),
      u32_value(arch + ".attention.head_count_kv", c.n_kv_heads),
      f32_value(arch + (a.norm == NormKind::RMSNorm ? ".attention.layer_norm_rms_epsilon" : ".attention.layer_norm_epsilon"),
                c.norm_eps),
      u32_value(arch + ".vocab_size", c.vocab_size),
  };
  if (a.positions == Positions::Rope) {
    meta.push_back(f32_value(arch + ".rope.freq_base", c.rope_theta));
    meta.push_back(u32_value(arch + ".rope.dimension_count", c.head_dim()));
  }
  if (c.head_size > 0) {
    meta.push_back(u32_value(arch + ".attention.key_length", c.head_dim()));
    meta.push_back(u32_value(arch + ".attention.value_length", c.head_dim()));
  }
  if (c.sliding_window > 0) meta.push_back(u32_value(arch + ".attention.sliding_window", c.sliding_window));
  return meta;
}

}  // namespace

void write_gguf_model(const ModelWeights& w, const std::string& path, std::optional<DType> dtype,
                      const std::vector<GgufOutValue>& extra) {
  const ModelConfig& c = w.config;
  const ModelFamily& fam = model_family(c.arch);
  const std::optional<GgufLayout> layout = fam.gguf();
  if (!layout)
    throw_usage_error(fmt::format("Orion does not write {} models as GGUF", fam.display_name()), "to",
                      "write safetensors instead");
  const Anatomy a = fam.anatomy();
  const DType dt = dtype.value_or(w.matrix_dtype());
  std::vector<GgufOutValue> meta = model_metadata(c, a, layout->arch, dt);
  meta.insert(meta.end(), extra.begin(), extra.end());

  ModelWeights scratch;  // the fused qkv matrices, the reordered q/k rows
  std::vector<GgufOutTensor> out;
  // Matrices in the requested dtype; vectors f32, as llama.cpp expects its norms and biases.
  auto add = [&](const std::string& name, const Tensor& t) {
    out.push_back({name, t.data, t.dtype, t.shape, t.shape.size() == 2 ? dt : DType::F32});
  };
  std::vector<float> divisors;
  if (c.rope_scaling.kind == RopeScaling::Kind::Llama3) {
    divisors = llama3_rope_divisors(c);
    add("rope_freqs.weight", Tensor{divisors.data(), DType::F32, {int64_t(divisors.size())}});
  }
  add("token_embd.weight", row_slice(w.tok_emb, 0, c.vocab_size));  // without llm.c's padding rows
  if (a.positions == Positions::Learned) add("position_embd.weight", w.pos_emb);
  const std::vector<LayerSlot> slots = layer_slots(a, layout->fused_qkv);
  for (int i = 0; i < c.n_layers; i++) {
    LayerWeights l = w.layers[size_t(i)];
    if (layout->rotate_half_qk) reorder_qk(scratch, l, c, /*to_file=*/true);
    const std::string blk = fmt::format("blk.{}.", i);
    if (layout->fused_qkv) {
      add(blk + "attn_qkv.weight", stack_rows(scratch, {&l.wq, &l.wk, &l.wv}, dt));
      if (a.biases) add(blk + "attn_qkv.bias", stack_rows(scratch, {&l.bq, &l.bk, &l.bv}, DType::F32));
    }
    for (const LayerSlot& s : slots) add(blk + s.name, l.*s.field);
  }
  add("output_norm.weight", w.final_norm);
  if (a.norm == NormKind::LayerNorm) add("output_norm.bias", w.final_norm_b);
  if (!c.tied_embeddings) add("output.weight", w.classifier);
  else if (layout->output_when_tied) add("output.weight", row_slice(w.tok_emb, 0, c.vocab_size));
  write_gguf(path, meta, out);
}

}  // namespace orion::io
