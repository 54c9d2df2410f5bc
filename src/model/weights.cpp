#include "model/weights.h"

#include <cmath>
#include <cstdlib>
#include <random>

#include "base/error.h"
#include "model/family/family.h"

namespace orion {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

const float* Tensor::f32() const {
  ORION_CHECK(dtype == DType::F32, "tensor is {} not f32", dtype_name(dtype));
  return static_cast<const float*>(data);
}

const void* Tensor::row(int64_t r) const {
  ORION_CHECK(shape.size() == 2 && r >= 0 && r < shape[0], "row {} of a tensor with {} dims", r, shape.size());
  return static_cast<const uint8_t*>(data) + size_t(r) * dtype_bytes(dtype, size_t(shape[1]));
}

void* ModelWeights::alloc(size_t bytes) {
  void* p = allocate_zeroed(bytes, "model weights");
  storage_.push_back(std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); }));
  return p;
}

Tensor ModelWeights::alloc_tensor(std::vector<int64_t> shape, DType dtype, void** writable) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  void* p = alloc(t.nbytes());
  t.data = p;
  if (writable) *writable = p;
  return t;
}

Tensor ModelWeights::copy_as(const Tensor& src, DType dtype) {
  void* p;
  Tensor t = alloc_tensor(src.shape, dtype, &p);
  convert_dtype(src.data, src.dtype, p, dtype, size_t(src.numel()));
  return t;
}

namespace {
template <typename W, typename L, typename F>
void visit(W& w, F&& f) {
  f("tok_emb", w.tok_emb);
  f("pos_emb", w.pos_emb);
  for (size_t i = 0; i < w.layers.size(); i++) {
    L& l = w.layers[i];
    auto n = [&](const char* s) { return fmt::format("layers.{}.{}", i, s); };
    f(n("attn_norm"), l.attn_norm), f(n("attn_norm_b"), l.attn_norm_b);
    f(n("wq"), l.wq), f(n("wk"), l.wk), f(n("wv"), l.wv), f(n("wo"), l.wo);
    f(n("bq"), l.bq), f(n("bk"), l.bk), f(n("bv"), l.bv), f(n("bo"), l.bo);
    f(n("q_norm"), l.q_norm), f(n("k_norm"), l.k_norm);
    f(n("ffn_norm"), l.ffn_norm), f(n("ffn_norm_b"), l.ffn_norm_b);
    f(n("w1"), l.w1), f(n("w2"), l.w2), f(n("w3"), l.w3), f(n("b1"), l.b1), f(n("b2"), l.b2);
  }
  f("final_norm", w.final_norm);
  f("final_norm_b", w.final_norm_b);
  if (!w.config.tied_embeddings) f("classifier", w.classifier);
}
}  // namespace

std::vector<std::pair<std::string, const Tensor*>> ModelWeights::named_tensors() const {
  std::vector<std::pair<std::string, const Tensor*>> out;
  visit<const ModelWeights, const LayerWeights>(*this, [&](const std::string& n, const Tensor& t) {
    if (!t.empty()) out.emplace_back(n, &t);
  });
  return out;
}

std::vector<std::pair<std::string, Tensor*>> ModelWeights::named_tensors_mut() {
  std::vector<std::pair<std::string, Tensor*>> out;
  visit<ModelWeights, LayerWeights>(*this, [&](const std::string& n, Tensor& t) {
    if (!t.empty()) out.emplace_back(n, &t);
  });
  return out;
}

void ModelWeights::validate(const std::string& source) const {
  const ModelConfig& c = config;
  c.validate(source);
  const int64_t C = c.dim, H = c.hidden_dim, Q = int64_t(c.n_heads) * c.head_dim(), KV = c.kv_dim();
  auto expect = [&](const std::string& name, const Tensor& t, std::vector<int64_t> shape) {
    if (t.empty())
      throw_input_error(source, "tensor is missing", name, -1, "the file is incomplete or not of this architecture");
    if (t.shape != shape)
      throw_input_error(source,
                        fmt::format("has shape [{}], expected [{}]", fmt::join(t.shape, ", "), fmt::join(shape, ", ")), name,
                        -1, "the tensor does not match the model's config");
    size_t bad;
    if (!all_finite(t.data, t.dtype, size_t(t.numel()), &bad))
      throw_input_error(source, fmt::format("element {} is NaN or Inf", bad), name, -1,
                        "the weights are corrupt (or training diverged); use an earlier checkpoint");
  };
  const Anatomy a = model_family(c.arch).anatomy();
  expect("tok_emb", tok_emb, {c.padded_vocab, C});
  if (a.positions == Positions::Learned) expect("pos_emb", pos_emb, {c.seq_len, C});
  if (int(layers.size()) != c.n_layers)
    throw_input_error(source, fmt::format("has {} layers, config says {}", layers.size(), c.n_layers), "layers");
  for (size_t i = 0; i < layers.size(); i++) {
    const LayerWeights& l = layers[i];
    auto n = [&](const char* s) { return fmt::format("layers.{}.{}", i, s); };
    expect(n("attn_norm"), l.attn_norm, {C});
    expect(n("wq"), l.wq, {Q, C});
    expect(n("wk"), l.wk, {KV, C});
    expect(n("wv"), l.wv, {KV, C});
    expect(n("wo"), l.wo, {C, Q});
    expect(n("ffn_norm"), l.ffn_norm, {C});
    expect(n("w1"), l.w1, {H, C});
    expect(n("w2"), l.w2, {C, H});
    if (a.biases) {
      expect(n("attn_norm_b"), l.attn_norm_b, {C});
      expect(n("bq"), l.bq, {Q}), expect(n("bk"), l.bk, {KV}), expect(n("bv"), l.bv, {KV});
      expect(n("bo"), l.bo, {C});
      expect(n("ffn_norm_b"), l.ffn_norm_b, {C});
      expect(n("b1"), l.b1, {H}), expect(n("b2"), l.b2, {C});
    }
    if (a.gated_ffn) expect(n("w3"), l.w3, {H, C});
    if (a.qkv_bias) expect(n("bq"), l.bq, {Q}), expect(n("bk"), l.bk, {KV}), expect(n("bv"), l.bv, {KV});
    if (a.qk_norm) expect(n("q_norm"), l.q_norm, {c.head_dim()}), expect(n("k_norm"), l.k_norm, {c.head_dim()});
  }
  expect("final_norm", final_norm, {C});
  if (a.norm == NormKind::LayerNorm) expect("final_norm_b", final_norm_b, {C});
  if (c.tied_embeddings) {
    if (classifier.data != tok_emb.data) throw_input_error(source, "tied classifier does not share tok_emb", "classifier");
  } else {
    if (classifier.shape.size() != 2 || classifier.shape[1] != C || classifier.shape[0] < c.vocab_size)
      throw_input_error(source, fmt::format("expected [{}, {}]", c.vocab_size, C), "classifier");
    expect("classifier", classifier, classifier.shape);
  }
  for (auto& [name, t] : named_tensors())
    if (t->shape.size() == 1 && t->dtype != DType::F32)
      throw_input_error(source, "vectors must be stored as f32 in memory", name);
}

namespace {
// Usage error unless a matrix whose rows hold `cols` elements can be stored in q8_0 blocks.
void require_q8_0_rows(int64_t cols, const std::string& what) {
  if (cols % kQ8Block != 0)
    throw_usage_error(fmt::format("q8_0 stores rows in blocks of {} elements; {} has rows of {}", kQ8Block, what, cols),
                      "dtype", "use f16 or bf16 for this model");
}
}  // namespace

void ModelWeights::check_fits_q8_0() const {
  for (auto& [name, t] : named_tensors())
    if (t->shape.size() == 2) require_q8_0_rows(t->shape[1], name);
}

void ModelWeights::convert_matrices(DType dtype) {
  bool tied = config.tied_embeddings;
  if (dtype == DType::Q8_0) check_fits_q8_0();
  for (auto& [name, t] : named_tensors_mut())
    if (t->shape.size() == 2 && t->dtype != dtype) *t = copy_as(*t, dtype);
  if (tied) classifier = tok_emb;
}

size_t ModelWeights::matrix_bytes() const {
  size_t n = 0;
  for (auto& [name, t] : named_tensors())
    if (t->shape.size() == 2 && name != "pos_emb") n += t->nbytes();
  // The embedding lookup reads one row, not the table; a tied classifier reads the table again.
  if (config.tied_embeddings) n += classifier.nbytes();
  return n - tok_emb.nbytes();
}

ModelWeights random_weights(const ModelConfig& c, uint64_t seed, DType dtype) {
  c.validate("random weights");
  ModelWeights w;
  w.config = c;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  // Matrices in another dtype are drawn a row at a time into an fp32 scratch row and converted,
  // so the model never holds an fp32 copy of itself (a 0.5B bf16 model stays ~1 GB resident).
  std::vector<float> row;
  auto matrix = [&](int64_t rows, int64_t cols) {
    if (dtype == DType::Q8_0) require_q8_0_rows(cols, "this config");
    void* p;
    Tensor t = w.alloc_tensor({rows, cols}, dtype, &p);
    row.resize(size_t(cols));
    for (int64_t r = 0; r < rows; r++) {
      float* q = dtype == DType::F32 ? static_cast<float*>(p) + r * cols : row.data();
      for (int64_t i = 0; i < cols; i++) q[i] = normal(rng);
      if (dtype != DType::F32)
        convert_dtype(q, DType::F32, static_cast<char*>(p) + size_t(r) * dtype_bytes(dtype, size_t(cols)), dtype,
                      size_t(cols));
    }
    return t;
  };
  auto vec = [&](int64_t n, float v) {
    void* p;
    Tensor t = w.alloc_tensor({n}, DType::F32, &p);
    for (int64_t i = 0; i < n; i++) static_cast<float*>(p)[i] = v;
    return t;
  };
  const int64_t C = c.dim, H = c.hidden_dim, Q = int64_t(c.n_heads) * c.head_dim(), KV = c.kv_dim();
  const Anatomy a = model_family(c.arch).anatomy();
  w.tok_emb = matrix(c.padded_vocab, C);
  if (a.positions == Positions::Learned) w.pos_emb = matrix(c.seq_len, C);
  w.layers.resize(size_t(c.n_layers));
  for (auto& l : w.layers) {
    l.attn_norm = vec(C, 1.0f);
    l.wq = matrix(Q, C), l.wk = matrix(KV, C), l.wv = matrix(KV, C), l.wo = matrix(C, Q);
    l.ffn_norm = vec(C, 1.0f);
    l.w1 = matrix(H, C), l.w2 = matrix(C, H);
    if (a.biases) {
      l.attn_norm_b = vec(C, 0), l.ffn_norm_b = vec(C, 0);
      l.bq = vec(Q, 0), l.bk = vec(KV, 0), l.bv = vec(KV, 0), l.bo = vec(C, 0);
      l.b1 = vec(H, 0), l.b2 = vec(C, 0);
    }
    if (a.gated_ffn) l.w3 = matrix(H, C);
    if (a.qkv_bias) l.bq = vec(Q, 0), l.bk = vec(KV, 0), l.bv = vec(KV, 0);
    if (a.qk_norm) l.q_norm = vec(c.head_dim(), 1.0f), l.k_norm = vec(c.head_dim(), 1.0f);
  }
  w.final_norm = vec(C, 1.0f);
  if (a.norm == NormKind::LayerNorm) w.final_norm_b = vec(C, 0);
  w.classifier = c.tied_embeddings ? w.tok_emb : matrix(c.vocab_size, C);
  return w;
}

}  // namespace orion
