// llm.c GPT-2 checkpoints (Karpathy's train_gpt2.c / train_gpt2.cu: gpt2_124M.bin, gpt2_124M_bf16.bin).
//
//   header: 256 × int32 (1024 bytes)
//     [0] magic 20240326   [1] version: 3 = fp32 parameters, 5 = bf16 parameters
//     [2] maxT  [3] V (real vocab)  [4] L  [5] NH  [6] C  [7] Vp (vocab padded, e.g. 50257 → 50304)
//   then the 16 parameter tensors, each for all layers at once:
//     wte [Vp, C]  wpe [maxT, C]  ln1w [L, C]  ln1b [L, C]  qkvw [L, 3C, C]  qkvb [L, 3C]
//     attprojw [L, C, C]  attprojb [L, C]  ln2w [L, C]  ln2b [L, C]  fcw [L, 4C, C]  fcb [L, 4C]
//     fcprojw [L, C, 4C]  fcprojb [L, C]  lnfw [C]  lnfb [C]
// Matrices are [out, in] like Orion's; qkvw's 3C rows are q, then k, then v, so wq/wk/wv are views.
// The classifier is tied to wte (its padding rows are never sampled).
#include "base/error.h"
#include "model/io/io_internal.h"

namespace orion::io {
namespace {

constexpr int32_t kMagic = 20240326;
constexpr size_t kHeaderInts = 256;

enum class P { Wte, Wpe, Ln1w, Ln1b, Qkvw, Qkvb, Attprojw, Attprojb, Ln2w, Ln2b, Fcw, Fcb, Fcprojw, Fcprojb, Lnfw, Lnfb };
constexpr P kOrder[] = {P::Wte,  P::Wpe,  P::Ln1w, P::Ln1b, P::Qkvw,    P::Qkvb,    P::Attprojw, P::Attprojb,
                        P::Ln2w, P::Ln2b, P::Fcw,  P::Fcb,  P::Fcprojw, P::Fcprojb, P::Lnfw,     P::Lnfb};

struct PShape {
  bool per_layer;
  std::vector<int64_t> shape;  // one layer's
};

PShape shape_of(const ModelConfig& c, P p) {
  const int64_t C = c.dim, Vp = c.padded_vocab, T = c.seq_len;
  switch (p) {
    case P::Wte: return {false, {Vp, C}};
    case P::Wpe: return {false, {T, C}};
    case P::Ln1w:
    case P::Ln1b:
    case P::Attprojb:
    case P::Ln2w:
    case P::Ln2b:
    case P::Fcprojb: return {true, {C}};
    case P::Qkvw: return {true, {3 * C, C}};
    case P::Qkvb: return {true, {3 * C}};
    case P::Attprojw: return {true, {C, C}};
    case P::Fcw: return {true, {4 * C, C}};
    case P::Fcb: return {true, {4 * C}};
    case P::Fcprojw: return {true, {C, 4 * C}};
    case P::Lnfw:
    case P::Lnfb: return {false, {C}};
  }
  return {false, {}};
}

int64_t elements(const PShape& s) {
  int64_t n = 1;
  for (int64_t d : s.shape) n *= d;
  return n;
}

ModelConfig config_from_header(const std::string& path, const int32_t* h) {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.seq_len = h[2], c.vocab_size = h[3], c.n_layers = h[4], c.n_heads = h[5], c.dim = h[6], c.padded_vocab = h[7];
  c.n_kv_heads = c.n_heads;
  c.hidden_dim = c.dim > 0 && c.dim < (1 << 16) ? 4 * c.dim : 0;
  c.tied_embeddings = true;
  c.validate(path);
  return c;
}

// Places one layer's (or the model's) slice of parameter p into the canonical weights.
void place(ModelWeights& w, P p, int l, const uint8_t* data, DType dt) {
  const ModelConfig& c = w.config;
  const int64_t C = c.dim;
  PShape s = shape_of(c, p);
  auto mat = [&] { return view_or_copy(w, data, dt, s.shape); };
  auto vec = [&] { return vector_f32(w, data, dt, s.shape[0]); };
  LayerWeights* L = s.per_layer ? &w.layers[size_t(l)] : nullptr;
  switch (p) {
    case P::Wte: w.tok_emb = mat(); break;
    case P::Wpe: w.pos_emb = mat(); break;
    case P::Ln1w: L->attn_norm = vec(); break;
    case P::Ln1b: L->attn_norm_b = vec(); break;
    case P::Qkvw: {
      Tensor qkv = mat();  // [3C, C]: rows q, then k, then v
      L->wq = row_slice(qkv, 0, C), L->wk = row_slice(qkv, C, C), L->wv = row_slice(qkv, 2 * C, C);
      break;
    }
    case P::Qkvb: {
      Tensor b = vec();
      L->bq = vec_slice(b, 0, C), L->bk = vec_slice(b, C, C), L->bv = vec_slice(b, 2 * C, C);
      break;
    }
    case P::Attprojw: L->wo = mat(); break;
    case P::Attprojb: L->bo = vec(); break;
    case P::Ln2w: L->ffn_norm = vec(); break;
    case P::Ln2b: L->ffn_norm_b = vec(); break;
    case P::Fcw: L->w1 = mat(); break;
    case P::Fcb: L->b1 = vec(); break;
    case P::Fcprojw: L->w2 = mat(); break;
    case P::Fcprojb: L->b2 = vec(); break;
    case P::Lnfw: w.final_norm = vec(); break;
    case P::Lnfb: w.final_norm_b = vec(); break;
  }
}

// The canonical tensors that make up parameter p of layer l, in file order.
std::vector<const Tensor*> parts(const ModelWeights& w, P p, int l) {
  const LayerWeights* L = l >= 0 && size_t(l) < w.layers.size() ? &w.layers[size_t(l)] : nullptr;
  switch (p) {
    case P::Wte: return {&w.tok_emb};
    case P::Wpe: return {&w.pos_emb};
    case P::Ln1w: return {&L->attn_norm};
    case P::Ln1b: return {&L->attn_norm_b};
    case P::Qkvw: return {&L->wq, &L->wk, &L->wv};
    case P::Qkvb: return {&L->bq, &L->bk, &L->bv};
    case P::Attprojw: return {&L->wo};
    case P::Attprojb: return {&L->bo};
    case P::Ln2w: return {&L->ffn_norm};
    case P::Ln2b: return {&L->ffn_norm_b};
    case P::Fcw: return {&L->w1};
    case P::Fcb: return {&L->b1};
    case P::Fcprojw: return {&L->w2};
    case P::Fcprojb: return {&L->b2};
    case P::Lnfw: return {&w.final_norm};
    case P::Lnfb: return {&w.final_norm_b};
  }
  return {};
}

}  // namespace

ModelWeights read_llmc(const std::string& path) {
  auto file = MappedFile::open(path);
  ByteReader r(file->data(), file->size(), path);
  const int32_t* h = reinterpret_cast<const int32_t*>(r.bytes(kHeaderInts * 4, "header"));
  if (h[0] != kMagic)
    throw_input_error(path, fmt::format("bad magic {} (llm.c model files start with {})", h[0], kMagic), "magic", 0,
                      "this is not an llm.c model file");
  const int version = h[1];
  if (version != 3 && version != 5)
    throw_input_error(path, fmt::format("unsupported llm.c version {} (Orion reads 3 = fp32 and 5 = bf16)", version),
                      "version", 4, "export the model again with a current llm.c");
  const DType dt = version == 3 ? DType::F32 : DType::BF16;
  ModelConfig c = config_from_header(path, h);

  uint64_t expected = kHeaderInts * 4;
  for (P p : kOrder) {
    PShape s = shape_of(c, p);
    expected += uint64_t(elements(s)) * (s.per_layer ? c.n_layers : 1) * dtype_size(dt);
  }
  if (file->size() != expected)
    throw_input_error(path,
                      fmt::format("the header ({}, {}) needs {} bytes, but the file has {} bytes", c.describe(),
                                  dtype_name(dt), expected, file->size()),
                      "header", 0,
                      file->size() < expected ? "the file is truncated; download or export it again"
                                              : "the header dims do not match the data; the file is corrupt");

  ModelWeights w;
  w.config = c;
  w.keep(file);
  w.layers.resize(size_t(c.n_layers));
  const uint8_t* data = file->data() + kHeaderInts * 4;
  for (P p : kOrder) {
    PShape s = shape_of(c, p);
    const size_t bytes = size_t(elements(s)) * dtype_size(dt);
    for (int l = 0; l < (s.per_layer ? c.n_layers : 1); l++, data += bytes) place(w, p, l, data, dt);
  }
  w.classifier = w.tok_emb;
  return w;
}

void write_llmc(const ModelWeights& w, const std::string& path, DType dtype) {
  const ModelConfig& c = w.config;
  ORION_CHECK(dtype == DType::F32 || dtype == DType::BF16, "llm.c dtype {}", dtype_name(dtype));
  write_file_atomic(path, [&](FileWriter& out) {
    int32_t h[kHeaderInts] = {};
    h[0] = kMagic, h[1] = dtype == DType::F32 ? 3 : 5;
    h[2] = c.seq_len, h[3] = c.vocab_size, h[4] = c.n_layers, h[5] = c.n_heads, h[6] = c.dim, h[7] = c.padded_vocab;
    out.write(h, sizeof h);
    for (P p : kOrder) {
      const int layers = shape_of(c, p).per_layer ? c.n_layers : 1;
      for (int l = 0; l < layers; l++)
        for (const Tensor* t : parts(w, p, l)) write_as(out, *t, dtype);
    }
  });
}

}  // namespace orion::io
