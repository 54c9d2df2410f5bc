// Helpers shared by the model-file tests (tests/model/test_io_*.cpp): tiny configs, random weights
// with random vectors too, bit-exact comparison (of weights, and of a tokenizer read back), and raw
// file surgery for malformed-input tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "base/error.h"
#include "model/io/gguf_file.h"
#include "model/io/model_io.h"
#include "model/tokenizer/llama2c_tokenizer.h"
#include "model/weights.h"

namespace orion::test {

// Llama with grouped-query attention (NKV < NH): C=64 H=160 L=2 NH=4 NKV=2 V=300 T=64.
inline ModelConfig tiny_llama(bool tied = true) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = 64, c.hidden_dim = 160, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2;
  c.vocab_size = c.padded_vocab = 300, c.seq_len = 64;
  c.tied_embeddings = tied;
  return c;
}

// GPT-2 with a padded vocabulary like llm.c's: C=64 H=256 L=2 NH=4 V=300 Vp=320 T=32.
inline ModelConfig tiny_gpt2(int padded_vocab = 320) {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.dim = 64, c.hidden_dim = 256, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4;
  c.vocab_size = 300, c.padded_vocab = padded_vocab, c.seq_len = 32;
  return c;
}

// random_weights() sets norms to 1 and biases to 0; give every vector random values too, so that a
// swapped or misplaced vector cannot go unnoticed.
inline ModelWeights random_model(const ModelConfig& c, uint64_t seed, DType dtype = DType::F32) {
  ModelWeights w = random_weights(c, seed, dtype);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (auto& [name, t] : w.named_tensors_mut()) {
    if (t->shape.size() != 1) continue;
    void* p;
    Tensor fresh = w.alloc_tensor(t->shape, DType::F32, &p);
    for (int64_t i = 0; i < t->numel(); i++) static_cast<float*>(p)[i] = normal(rng);
    *t = fresh;
  }
  return w;
}

// Value of element i after a round trip through dtype `via` (exact when via is the stored dtype).
inline float through(const Tensor& t, size_t i, DType via) {
  float v = load_as_f32(t.data, t.dtype, i);
  switch (via) {
    case DType::F32: return v;
    case DType::F16: return f16_to_f32(f32_to_f16(v));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(v));
    case DType::Q8_0: {  // quantise the element's whole block of 32
      float block[kQ8Block];
      const size_t first = i / kQ8Block * kQ8Block;
      for (int j = 0; j < kQ8Block; j++) block[j] = load_as_f32(t.data, t.dtype, first + j);
      BlockQ8_0 q;
      quantize_q8_0(block, &q, kQ8Block);
      return f16_to_f32(q.d) * float(q.q[i - first]);
    }
  }
  return v;
}

// Every tensor of `a` is in `b` with the same shape, and every element of b equals a's element
// after rounding through `matrix_via` (matrices) / `vector_via` (vectors), bit for bit.
// `rows_limit` compares only the first rows of tok_emb (llm.c padding rows are dropped by HF).
inline void expect_same_weights(const ModelWeights& a, const ModelWeights& b, DType matrix_via = DType::F32,
                                DType vector_via = DType::F32, int64_t tok_rows = -1) {
  auto bt = b.named_tensors();
  std::map<std::string, const Tensor*> by_name(bt.begin(), bt.end());
  EXPECT_EQ(a.named_tensors().size(), bt.size());
  for (auto& [name, ta] : a.named_tensors()) {
    ASSERT_TRUE(by_name.count(name)) << name;
    const Tensor* tb = by_name[name];
    std::vector<int64_t> shape = ta->shape;
    if (name == "tok_emb" && tok_rows >= 0) shape[0] = tok_rows;
    ASSERT_EQ(shape, tb->shape) << name;
    DType via = ta->shape.size() == 2 ? matrix_via : vector_via;
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    size_t mismatches = 0;
    for (size_t i = 0; i < n; i++) {
      float x = through(*ta, i, via), y = load_as_f32(tb->data, tb->dtype, i);
      if (std::memcmp(&x, &y, 4) != 0 && mismatches++ < 3)
        ADD_FAILURE() << name << "[" << i << "]: " << x << " became " << y;
    }
    EXPECT_EQ(mismatches, 0u) << name;
  }
  EXPECT_EQ(b.config.tied_embeddings, b.classifier.data == b.tok_emb.data);
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A tokenizer read back from a file is the llama2.c tokenizer `ref`: the same pieces and scores.
inline void expect_same_pieces(const Tokenizer& back, const Llama2cTokenizer& ref) {
  const auto* t = dynamic_cast<const Llama2cTokenizer*>(&back);
  ASSERT_NE(t, nullptr) << back.name();
  ASSERT_EQ(t->vocab_size(), ref.vocab_size());
  for (int id = 0; id < ref.vocab_size(); id++) {
    EXPECT_EQ(t->piece(id), ref.piece(id)) << id;
    EXPECT_EQ(t->score(id), ref.score(id)) << id;
  }
}

inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

template <typename T>
inline void poke(const std::string& path, size_t offset, T value) {
  std::string s = slurp(path);
  std::memcpy(&s[offset], &value, sizeof(T));
  spit(path, s);
}

template <typename T>
inline T peek(const std::string& path, size_t offset) {
  std::string s = slurp(path);
  T v;
  std::memcpy(&v, &s[offset], sizeof(T));
  return v;
}

// Runs f, which must throw an Input error whose line names `file` and contains every word.
template <typename F>
inline void expect_input_error(F&& f, const std::string& file, std::initializer_list<std::string> words) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << file;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input) << e.what();
    std::string line = e.what();
    EXPECT_NE(line.find(file), std::string::npos) << line;
    for (auto& w : words) EXPECT_NE(line.find(w), std::string::npos) << "'" << w << "' not in: " << line;
  }
}

// Splits a safetensors file into its JSON header and data, lets `edit` change them, writes it back.
template <typename F>
inline void edit_safetensors(const std::string& path, F&& edit) {
  std::string s = slurp(path);
  uint64_t n;
  std::memcpy(&n, s.data(), 8);
  nlohmann::json header = nlohmann::json::parse(s.substr(8, n));
  std::string data = s.substr(8 + n);
  edit(header, data);
  std::string text = header.dump();
  uint64_t len = text.size();
  spit(path, std::string(reinterpret_cast<const char*>(&len), 8) + text + data);
}

// Rewrites a GGUF file with more metadata and tensors (Orion's writer, the file's own entries),
// leaving out the keys and tensors named in `drop`.
inline void rewrite_gguf_with(const std::string& path, std::vector<io::GgufOutValue> kv,
                              std::vector<io::GgufOutTensor> tensors, const std::vector<std::string>& drop = {}) {
  io::GgufFile f = io::GgufFile::open(path);
  auto dropped = [&](const std::string& name) { return std::find(drop.begin(), drop.end(), name) != drop.end(); };
  for (auto& [key, value] : f.metadata())
    if (!dropped(key)) kv.push_back({key, value});
  for (const io::GgufTensor& t : f.tensors())
    if (!dropped(t.name)) tensors.push_back({t.name, t.data, *t.dtype, t.shape, *t.dtype});
  io::write_gguf(path + ".new", kv, tensors);
  std::filesystem::rename(path + ".new", path);
}

}  // namespace orion::test
