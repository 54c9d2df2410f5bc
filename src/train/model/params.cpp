#include "train/model/params.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "base/error.h"
#include "model/family/family.h"
#include "train/family/training_family.h"

namespace orion::train {
namespace {

// When a per-layer tensor is there (model/family/family.h Anatomy).
enum class Present {
  Always,
  Biases,   // every linear and norm has a bias (GPT-2)
  QkvBias,  // q, k and v have biases: with every bias (GPT-2) or alone (Qwen2)
  Gate,     // a gated FFN's third matrix (Llama's w3)
  QkNorm,   // per-head RMSNorm gains of q and k (Qwen3)
};

// One per-layer tensor: its name, where it lives in LayerWeights and LayerParams, its shape.
struct LayerSlot {
  const char* name;
  Tensor LayerWeights::*weight;
  float* LayerParams::*param;
  Present present;
  char rows, cols;  // 'C' dim, 'Q' NH·HS, 'K' NKV·HS, 'H' hidden, 'S' HS; cols 0 for a vector
};

constexpr LayerSlot kLayerSlots[] = {
    {"attn_norm", &LayerWeights::attn_norm, &LayerParams::attn_norm, Present::Always, 'C', 0},
    {"attn_norm_b", &LayerWeights::attn_norm_b, &LayerParams::attn_norm_b, Present::Biases, 'C', 0},
    {"wq", &LayerWeights::wq, &LayerParams::wq, Present::Always, 'Q', 'C'},
    {"wk", &LayerWeights::wk, &LayerParams::wk, Present::Always, 'K', 'C'},
    {"wv", &LayerWeights::wv, &LayerParams::wv, Present::Always, 'K', 'C'},
    {"wo", &LayerWeights::wo, &LayerParams::wo, Present::Always, 'C', 'Q'},
    {"bq", &LayerWeights::bq, &LayerParams::bq, Present::QkvBias, 'Q', 0},
    {"bk", &LayerWeights::bk, &LayerParams::bk, Present::QkvBias, 'K', 0},
    {"bv", &LayerWeights::bv, &LayerParams::bv, Present::QkvBias, 'K', 0},
    {"bo", &LayerWeights::bo, &LayerParams::bo, Present::Biases, 'C', 0},
    {"q_norm", &LayerWeights::q_norm, &LayerParams::q_norm, Present::QkNorm, 'S', 0},
    {"k_norm", &LayerWeights::k_norm, &LayerParams::k_norm, Present::QkNorm, 'S', 0},
    {"ffn_norm", &LayerWeights::ffn_norm, &LayerParams::ffn_norm, Present::Always, 'C', 0},
    {"ffn_norm_b", &LayerWeights::ffn_norm_b, &LayerParams::ffn_norm_b, Present::Biases, 'C', 0},
    {"w1", &LayerWeights::w1, &LayerParams::w1, Present::Always, 'H', 'C'},
    {"w2", &LayerWeights::w2, &LayerParams::w2, Present::Always, 'C', 'H'},
    {"w3", &LayerWeights::w3, &LayerParams::w3, Present::Gate, 'H', 'C'},
    {"b1", &LayerWeights::b1, &LayerParams::b1, Present::Biases, 'H', 0},
    {"b2", &LayerWeights::b2, &LayerParams::b2, Present::Biases, 'C', 0},
};

bool present(const LayerSlot& s, const Anatomy& a) {
  switch (s.present) {
    case Present::Always: return true;
    case Present::Biases: return a.biases;
    case Present::QkvBias: return a.biases || a.qkv_bias;
    case Present::Gate: return a.gated_ffn;
    case Present::QkNorm: return a.qk_norm;
  }
  return false;
}

// Calls f(name, shape, Tensor& slot in w, float*& pointer in p) for every tensor of the config,
// in buffer order. w and p may be null (then a dummy slot is passed).
template <typename F>
void for_each_tensor(const ModelConfig& c, ModelWeights* w, ParamBuffer* p, F&& f) {
  const Anatomy a = model_family(c.arch).anatomy();
  Tensor dummy_t;
  float* dummy_p = nullptr;
  auto dim = [&](char d) -> int64_t {
    switch (d) {
      case 'C': return c.dim;
      case 'Q': return int64_t(c.n_heads) * c.head_dim();
      case 'K': return c.kv_dim();
      case 'H': return c.hidden_dim;
      case 'S': return c.head_dim();
    }
    return 0;
  };
  auto top = [&](const char* name, std::vector<int64_t> shape, Tensor ModelWeights::*wt, float* ParamBuffer::*pp) {
    f(std::string(name), std::move(shape), w ? w->*wt : dummy_t, p ? p->*pp : dummy_p);
  };
  top("tok_emb", {c.padded_vocab, c.dim}, &ModelWeights::tok_emb, &ParamBuffer::tok_emb);
  if (a.positions == Positions::Learned) top("pos_emb", {c.seq_len, c.dim}, &ModelWeights::pos_emb, &ParamBuffer::pos_emb);
  for (int l = 0; l < c.n_layers; l++)
    for (const LayerSlot& s : kLayerSlots) {
      if (!present(s, a)) continue;
      std::vector<int64_t> shape =
          s.cols ? std::vector<int64_t>{dim(s.rows), dim(s.cols)} : std::vector<int64_t>{dim(s.rows)};
      f(fmt::format("layers.{}.{}", l, s.name), std::move(shape), w ? w->layers[size_t(l)].*s.weight : dummy_t,
        p ? p->layers[size_t(l)].*s.param : dummy_p);
    }
  top("final_norm", {c.dim}, &ModelWeights::final_norm, &ParamBuffer::final_norm);
  if (a.norm == NormKind::LayerNorm) top("final_norm_b", {c.dim}, &ModelWeights::final_norm_b, &ParamBuffer::final_norm_b);
  if (!c.tied_embeddings) top("classifier", {c.vocab_size, c.dim}, &ModelWeights::classifier, &ParamBuffer::classifier);
}

}  // namespace

ParamBuffer::ParamBuffer(const ModelConfig& config) : ParamBuffer(config, true) {}

ParamBuffer::ParamBuffer(const ModelConfig& config, bool layer_matrices) : config_(config), layer_matrices_(layer_matrices) {
  config_.validate("training parameters");
  // The CPU blocks train every feature of Llama's relatives; the ANE path refuses them (Trainer,
  // LoraTrainer, frontends/program_set.cpp).
  training_family(config_.arch);  // refuses a family without training blocks before any work
  size_t off = 0;
  for_each_tensor(config_, nullptr, nullptr, [&](const std::string& name, std::vector<int64_t> shape, Tensor&, float*&) {
    if (!stored(name, shape)) return;
    ParamInfo t;
    t.name = name;
    t.numel = 1;
    for (int64_t d : shape) t.numel *= size_t(d);
    t.shape = std::move(shape);
    t.offset = off;
    off += (t.numel + 15) / 16 * 16;  // next tensor on a 64-byte boundary
    tensors_.push_back(std::move(t));
  });
  size_ = off;
  if (size_ > SIZE_MAX / sizeof(float)) throw_out_of_memory("the model's parameters", SIZE_MAX);
  float* p = static_cast<float*>(
      allocate_zeroed(std::max<size_t>(size_, 16) * sizeof(float), fmt::format("the parameters of {}", config_.describe())));
  data_ = std::shared_ptr<float>(p, [](float* q) { std::free(q); });
  bind_pointers();
}

void ParamBuffer::bind_pointers() {
  layers.assign(size_t(config_.n_layers), LayerParams{});
  size_t i = 0;
  for_each_tensor(config_, nullptr, this, [&](const std::string& name, std::vector<int64_t> shape, Tensor&, float*& ptr) {
    ptr = stored(name, shape) ? data_.get() + tensors_[i++].offset : nullptr;
  });
  // Tied: the classifier is the first V rows of the token embedding table.
  if (config_.tied_embeddings) classifier = tok_emb;
}

ParamBuffer ParamBuffer::clone() const {
  ParamBuffer p(config_, layer_matrices_);
  std::memcpy(p.data(), data(), size_ * sizeof(float));
  return p;
}

size_t ParamBuffer::num_params() const {
  size_t n = 0;
  for (const ParamInfo& t : tensors_) n += t.numel;
  return n;
}

const ParamInfo& ParamBuffer::tensor(const std::string& name) const {
  for (const ParamInfo& t : tensors_)
    if (t.name == name) return t;
  throw_usage_error(fmt::format("the model has no tensor '{}'", name), "tensor");
}

// In blocks over the threads: one core alone does not reach the memory's write bandwidth, and a
// GPT-2 124M gradient is 500 MB cleared every step.
void ParamBuffer::zero() {
  constexpr size_t kBlock = size_t(1) << 20;  // floats per task
  float* p = data();
#pragma omp parallel for schedule(static) if (size_ > 4 * kBlock)
  for (size_t b = 0; b < size_; b += kBlock) std::memset(p + b, 0, std::min(kBlock, size_ - b) * sizeof(float));
}

void ParamBuffer::load(const ModelWeights& w) {
  if (w.config.arch != config_.arch || w.config.dim != config_.dim || w.config.hidden_dim != config_.hidden_dim ||
      w.config.n_layers != config_.n_layers || w.config.n_heads != config_.n_heads ||
      w.config.n_kv_heads != config_.n_kv_heads || w.config.vocab_size != config_.vocab_size ||
      w.config.padded_vocab != config_.padded_vocab || w.config.seq_len != config_.seq_len ||
      w.config.tied_embeddings != config_.tied_embeddings)
    throw_usage_error(fmt::format("weights ({}) do not match the model being trained ({})", w.config.describe(),
                                  config_.describe()),
                      "weights");
  w.validate("weights to train");
  size_t i = 0;
  auto& src = const_cast<ModelWeights&>(w);  // for_each_tensor hands out mutable slots; only read here
  for_each_tensor(config_, &src, nullptr, [&](const std::string& name, std::vector<int64_t> shape, Tensor& t, float*&) {
    if (!stored(name, shape)) return;
    const ParamInfo& info = tensors_[i++];
    ORION_CHECK(size_t(t.numel()) >= info.numel, "{} has {} elements, expected {}", name, t.numel(), info.numel);
    convert_dtype(t.data, t.dtype, data() + info.offset, DType::F32, info.numel);  // f16/bf16 → fp32
  });
}

ParamBuffer ParamBuffer::from_weights(const ModelWeights& w) {
  ParamBuffer p(w.config);
  p.load(w);
  return p;
}

ModelWeights ParamBuffer::view() const {
  ModelWeights w;
  w.config = config_;
  w.layers.resize(size_t(config_.n_layers));
  w.keep(std::shared_ptr<const void>(data_, data_.get()));  // the view co-owns the buffer
  size_t i = 0;
  for_each_tensor(config_, &w, nullptr, [&](const std::string& name, std::vector<int64_t> shape, Tensor& t, float*&) {
    if (!stored(name, shape)) return;  // left empty
    t.data = data_.get() + tensors_[i++].offset;
    t.dtype = DType::F32;
    t.shape = std::move(shape);
  });
  if (config_.tied_embeddings) w.classifier = w.tok_emb;
  return w;
}

ModelWeights ParamBuffer::to_weights(DType matrices) const {
  ORION_CHECK(layer_matrices_, "to_weights of parameters without the blocks' matrices");
  ModelWeights v = view();
  ModelWeights w;
  w.config = config_;
  w.layers.resize(size_t(config_.n_layers));
  // Walk the view and the copy side by side, converting each tensor into memory owned by w.
  std::vector<Tensor*> dst;
  std::vector<const Tensor*> src;
  for_each_tensor(config_, &w, nullptr,
                  [&](const std::string&, std::vector<int64_t>, Tensor& t, float*&) { dst.push_back(&t); });
  for_each_tensor(config_, &v, nullptr,
                  [&](const std::string&, std::vector<int64_t>, Tensor& t, float*&) { src.push_back(&t); });
  for (size_t k = 0; k < dst.size(); k++) *dst[k] = w.copy_as(*src[k], src[k]->shape.size() == 2 ? matrices : DType::F32);
  if (config_.tied_embeddings) w.classifier = w.tok_emb;
  return w;
}

void init_params(Params& p, uint64_t seed) {
  const ModelConfig& c = p.config();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float residual_std = 0.02f / std::sqrt(2.0f * float(c.n_layers));
  auto ends_with = [](const std::string& s, const char* tail) {
    const size_t n = std::strlen(tail);
    return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
  };
  for (const ParamInfo& t : p.tensors()) {
    float* x = p.data() + t.offset;
    if (!t.matrix()) {  // norm gains start at 1 (identity), biases at 0
      const bool gain = ends_with(t.name, "norm");
      std::fill_n(x, t.numel, gain ? 1.0f : 0.0f);
      continue;
    }
    // The scaled-down init: wo and one FFN projection (w2 without a gate, w3 with one).
    const bool gated = model_family(c.arch).anatomy().gated_ffn;
    const bool residual = ends_with(t.name, ".wo") || ends_with(t.name, gated ? ".w3" : ".w2");
    const float std = residual ? residual_std : 0.02f;
    for (size_t i = 0; i < t.numel; i++) x[i] = std * normal(rng);
  }
}

}  // namespace orion::train
