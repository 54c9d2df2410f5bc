// llama2.c model files (Karpathy's run.c / export.py), Llama architecture, fp32 throughout.
//
// Version 0 ("legacy"), what run.c reads:
//   header: 7 × int32  dim C, hidden_dim H, n_layers L, n_heads NH, n_kv_heads NKV,
//                      vocab_size V (negative: the classifier is not shared with the embedding),
//                      seq_len T                                                     (28 bytes)
//   then fp32 arrays, each for all layers at once:
//     token_embedding [V, C]    rms_att [L, C]     wq [L, C, C]       wk [L, KV, C]   (KV = NKV·HS)
//     wv [L, KV, C]             wo [L, C, C]       rms_ffn [L, C]     w1 [L, H, C]
//     w2 [L, C, H]              w3 [L, H, C]       rms_final [C]
//     freq_cis_real [T, HS/2]   freq_cis_imag [T, HS/2]   (RoPE tables; run.c skips them)
//     wcls [V, C]               only when V was negative
// Version 1 (export.py --version 1):
//   header: uint32 magic 0x616b3432 ("ak42"), int32 version = 1, the 7 int32 above (V positive),
//           uint8 shared_classifier, zeros up to 256 bytes
//   then: rms_att [L, C], rms_ffn [L, C], rms_final [C], token_embedding [V, C], wq, wk, wv, wo,
//         w1, w2, w3 (as above), wcls [V, C] when not shared. No RoPE tables.
// Every array is already in Orion's canonical layout, so a tensor is a view into the mapping where
// it starts on a 64-byte line (version 1, dims of multiples of 16); version 0's 28-byte header puts
// every array 28 bytes past one, and those are copied onto lines (view_or_copy: the f32 kernels'
// 64-byte loads would each straddle two).
#include <cstdlib>

#include "base/error.h"
#include "model/io/io_internal.h"

namespace orion::io {
namespace {

constexpr uint32_t kAk42Magic = 0x616b3432;
constexpr size_t kV1HeaderBytes = 256;

enum class Sec { TokEmb, RmsAtt, Wq, Wk, Wv, Wo, RmsFfn, W1, W2, W3, RmsFinal, FreqReal, FreqImag, Wcls };

std::vector<Sec> sections(int version, bool shared, bool with_freq) {
  std::vector<Sec> s;
  if (version == 0) {
    s = {Sec::TokEmb, Sec::RmsAtt, Sec::Wq, Sec::Wk, Sec::Wv,      Sec::Wo,
         Sec::RmsFfn, Sec::W1,     Sec::W2, Sec::W3, Sec::RmsFinal};
    if (with_freq) s.insert(s.end(), {Sec::FreqReal, Sec::FreqImag});
  } else {
    s = {Sec::RmsAtt, Sec::RmsFfn, Sec::RmsFinal, Sec::TokEmb, Sec::Wq, Sec::Wk,
         Sec::Wv,     Sec::Wo,     Sec::W1,       Sec::W2,     Sec::W3};
  }
  if (!shared) s.push_back(Sec::Wcls);
  return s;
}

struct SecShape {
  bool per_layer;
  std::vector<int64_t> shape;  // of one layer's tensor
};

SecShape shape_of(const ModelConfig& c, Sec s) {
  const int64_t C = c.dim, H = c.hidden_dim, V = c.vocab_size, KV = c.kv_dim(), Q = int64_t(c.n_heads) * c.head_dim();
  const int64_t T = c.seq_len, half = c.head_dim() / 2;
  switch (s) {
    case Sec::TokEmb: return {false, {V, C}};
    case Sec::RmsAtt: return {true, {C}};
    case Sec::Wq: return {true, {Q, C}};
    case Sec::Wk: return {true, {KV, C}};
    case Sec::Wv: return {true, {KV, C}};
    case Sec::Wo: return {true, {C, Q}};
    case Sec::RmsFfn: return {true, {C}};
    case Sec::W1: return {true, {H, C}};
    case Sec::W2: return {true, {C, H}};
    case Sec::W3: return {true, {H, C}};
    case Sec::RmsFinal: return {false, {C}};
    case Sec::FreqReal: return {false, {T, half}};
    case Sec::FreqImag: return {false, {T, half}};
    case Sec::Wcls: return {false, {V, C}};
  }
  return {false, {}};
}

// The canonical tensor a section fills, or nullptr for the RoPE tables (recomputed, not stored).
template <typename W>
auto slot(W& w, Sec s, int layer) -> decltype(&w.tok_emb) {
  switch (s) {
    case Sec::TokEmb: return &w.tok_emb;
    case Sec::RmsAtt: return &w.layers[layer].attn_norm;
    case Sec::Wq: return &w.layers[layer].wq;
    case Sec::Wk: return &w.layers[layer].wk;
    case Sec::Wv: return &w.layers[layer].wv;
    case Sec::Wo: return &w.layers[layer].wo;
    case Sec::RmsFfn: return &w.layers[layer].ffn_norm;
    case Sec::W1: return &w.layers[layer].w1;
    case Sec::W2: return &w.layers[layer].w2;
    case Sec::W3: return &w.layers[layer].w3;
    case Sec::RmsFinal: return &w.final_norm;
    case Sec::FreqReal:
    case Sec::FreqImag: return nullptr;
    case Sec::Wcls: return &w.classifier;
  }
  return nullptr;
}

int64_t count_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t payload_bytes(const ModelConfig& c, const std::vector<Sec>& secs) {
  uint64_t n = 0;
  for (Sec s : secs) {
    SecShape sh = shape_of(c, s);
    n += uint64_t(count_elements(sh.shape)) * (sh.per_layer ? c.n_layers : 1);
  }
  return n * 4;
}

// The 7 header dims as a config; throws (naming the file) when they make no sense.
ModelConfig config_from_header(const std::string& path, const int32_t h[7], int version) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = h[0], c.hidden_dim = h[1], c.n_layers = h[2], c.n_heads = h[3], c.n_kv_heads = h[4];
  int64_t v = h[5];
  c.vocab_size = c.padded_vocab = int(std::llabs(v) > (1 << 30) ? 0 : std::llabs(v));
  c.tied_embeddings = v > 0;
  c.seq_len = h[6];
  try {
    c.validate(path);
  } catch (const Error& e) {
    throw_input_error(path, fmt::format("{} (read as a llama2.c version {} header)", e.message(), version),
                      e.context().field, -1,
                      version == 0 ? "this is not a model file Orion knows: llama2.c files start with 7 int32 dims, "
                                     "llm.c files with magic 20240326, safetensors with an 8-byte header length"
                                   : "the header is corrupt; export the model again");
  }
  return c;
}

}  // namespace

ModelWeights read_llama2c(const std::string& path) {
  auto file = MappedFile::open(path);
  ByteReader r(file->data(), file->size(), path);
  int version = 0;
  bool shared = true;
  if (file->size() >= 4 && r.read<uint32_t>("magic") == kAk42Magic) {
    version = r.read<int32_t>("version");
    if (version != 1)
      throw_input_error(path, fmt::format("unsupported llama2.c version {} (Orion reads versions 0 and 1, fp32)", version),
                        "version", 4, version == 2 ? "version 2 is int8-quantized; export with --version 0 or 1" : "");
  } else {
    r.seek(0, "header");
  }
  int32_t h[7];
  const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; i++) h[i] = r.read<int32_t>(names[i]);
  ModelConfig c = config_from_header(path, h, version);
  if (version == 1) {
    shared = r.read<uint8_t>("shared_classifier") != 0;
    c.tied_embeddings = shared;
    r.seek(kV1HeaderBytes, "header padding");
  } else {
    shared = c.tied_embeddings;
  }

  // The header fixes the file size exactly. Legacy files carry the RoPE tables; accept files
  // written without them too.
  const uint64_t header = r.offset(), actual = file->size();
  std::vector<Sec> secs = sections(version, shared, version == 0);
  uint64_t expected = header + payload_bytes(c, secs);
  if (version == 0 && actual != expected) {
    std::vector<Sec> no_freq = sections(0, shared, false);
    if (actual == header + payload_bytes(c, no_freq)) secs = no_freq, expected = actual;
  }
  if (actual != expected)
    throw_input_error(
        path, fmt::format("the header ({}) needs {} bytes, but the file has {} bytes", c.describe(), expected, actual),
        "header", 0,
        actual < expected ? "the file is truncated; download or export it again"
                          : "the header dims do not match the data; the file is corrupt or not a llama2.c model");

  ModelWeights w;
  w.config = c;
  w.keep(file);
  w.layers.resize(size_t(c.n_layers));
  const uint8_t* p = file->data() + header;
  for (Sec s : secs) {
    SecShape sh = shape_of(c, s);
    const int layers = sh.per_layer ? c.n_layers : 1;
    const size_t bytes = size_t(count_elements(sh.shape)) * 4;
    for (int l = 0; l < layers; l++, p += bytes)
      if (Tensor* t = slot(w, s, l)) *t = view_or_copy(w, p, DType::F32, sh.shape);
  }
  if (shared) w.classifier = w.tok_emb;
  return w;
}

void write_llama2c(const ModelWeights& w, const std::string& path, int version) {
  const ModelConfig& c = w.config;
  const bool shared = c.tied_embeddings;
  std::vector<float> freq_real, freq_imag;
  if (version == 0) rope_tables(c, &freq_real, &freq_imag);
  write_file_atomic(path, [&](FileWriter& out) {
    const int32_t v = shared ? c.vocab_size : -c.vocab_size;
    if (version == 1) {
      out.write_pod(kAk42Magic);
      out.write_pod(int32_t(1));
    }
    for (int32_t x : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, version == 1 ? c.vocab_size : v, c.seq_len})
      out.write_pod(x);
    if (version == 1) {
      out.write_pod(uint8_t(shared ? 1 : 0));
      out.pad_to(kV1HeaderBytes);
    }
    for (Sec s : sections(version, shared, version == 0)) {
      if (s == Sec::FreqReal || s == Sec::FreqImag) {
        const auto& table = s == Sec::FreqReal ? freq_real : freq_imag;
        out.write(table.data(), table.size() * 4);
        continue;
      }
      const int layers = shape_of(c, s).per_layer ? c.n_layers : 1;
      for (int l = 0; l < layers; l++) {
        const Tensor* t = slot(w, s, l);
        // The embedding and classifier may carry padding rows (llm.c); the file holds V rows.
        write_as(out, t->shape.size() == 2 && (s == Sec::TokEmb || s == Sec::Wcls) ? row_slice(*t, 0, c.vocab_size) : *t,
                 DType::F32);
      }
    }
  });
}

}  // namespace orion::io
