#include "model/lora/lora.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "base/error.h"
#include "model/family/family.h"

namespace orion {

namespace {
size_t align16(size_t n) { return (n + 15) / 16 * 16; }

// Orion's names (q, k, v, o, w1, w2, w3), then the Hugging Face module names (Llama and GPT-2).
std::optional<LoraTarget> target_from_name(const std::string& s) {
  for (LoraTarget t : kAllLoraTargets)
    if (s == lora_target_name(t)) return t;
  static const std::pair<const char*, LoraTarget> kAliases[] = {
      {"q_proj", LoraTarget::Q},     {"k_proj", LoraTarget::K},      {"v_proj", LoraTarget::V},
      {"o_proj", LoraTarget::O},     {"gate_proj", LoraTarget::W1},  {"gate", LoraTarget::W1},
      {"down_proj", LoraTarget::W2}, {"down", LoraTarget::W2},       {"up_proj", LoraTarget::W3},
      {"up", LoraTarget::W3},        {"attn.c_proj", LoraTarget::O}, {"c_fc", LoraTarget::W1},
      {"fc", LoraTarget::W1},        {"mlp.c_proj", LoraTarget::W2}};
  for (auto& [name, t] : kAliases)
    if (s == name) return t;
  return std::nullopt;
}
}  // namespace

const char* lora_target_name(LoraTarget t) {
  switch (t) {
    case LoraTarget::Q: return "q";
    case LoraTarget::K: return "k";
    case LoraTarget::V: return "v";
    case LoraTarget::O: return "o";
    case LoraTarget::W1: return "w1";
    case LoraTarget::W2: return "w2";
    case LoraTarget::W3: return "w3";
  }
  return "?";
}

std::vector<LoraTarget> parse_lora_targets(const std::string& csv, Arch arch) {
  LoraTargetSet want;
  size_t start = 0;
  while (start <= csv.size()) {
    size_t end = csv.find(',', start);
    if (end == std::string::npos) end = csv.size();
    std::string s = csv.substr(start, end - start);
    start = end + 1;
    if (s.empty()) continue;
    if (s == "all") {
      for (LoraTarget t : kAllLoraTargets)
        if (model_family(arch).peft().module[int(t)] != nullptr) want.add(t);
      continue;
    }
    const std::optional<LoraTarget> t = target_from_name(s);
    if (!t)
      throw_usage_error(fmt::format("unknown LoRA target '{}'", s), "--targets",
                        "use q, k, v, o, w1 (gate), w2 (down), w3 (up; Llama only) or all, comma-separated");
    want.add(*t);
  }
  std::vector<LoraTarget> out = want.list();
  if (out.empty()) throw_usage_error("no LoRA targets given", "--targets", "e.g. --targets q,v");
  return out;
}

std::pair<int64_t, int64_t> lora_target_shape(const ModelConfig& c, LoraTarget t) {
  const int64_t C = c.dim, Q = int64_t(c.n_heads) * c.head_dim(), KV = c.kv_dim(), H = c.hidden_dim;
  switch (t) {
    case LoraTarget::Q: return {Q, C};
    case LoraTarget::K: return {KV, C};
    case LoraTarget::V: return {KV, C};
    case LoraTarget::O: return {C, Q};
    case LoraTarget::W1: return {H, C};
    case LoraTarget::W2: return {C, H};
    case LoraTarget::W3: return {H, C};
  }
  return {0, 0};
}

LoraAdapter::LoraAdapter(const ModelConfig& base, int rank, float alpha, std::vector<LoraTarget> targets)
    : base_(base), rank_(rank), alpha_(alpha), targets_(std::move(targets)) {
  if (rank < 1) throw_usage_error(fmt::format("LoRA rank {} must be at least 1", rank), "--rank");
  if (!(alpha > 0) || !std::isfinite(alpha)) throw_usage_error("LoRA alpha must be a positive number", "--alpha");
  if (targets_.empty()) throw_usage_error("a LoRA adapter needs at least one target", "--targets");
  const ModelFamily& family = model_family(base.arch);
  for (LoraTarget t : targets_)
    if (!family.peft().module[int(t)])
      throw_usage_error(fmt::format("{} has no {} projection", family.display_name(),
                                    t == LoraTarget::W3 ? "w3 (up)" : lora_target_name(t)),
                        "--targets",
                        fmt::format("{}'s FFN projections are w1 ({}) and w2 ({})", family.display_name(),
                                    family.peft().target_module[int(LoraTarget::W1)],
                                    family.peft().target_module[int(LoraTarget::W2)]));
  size_t offset = 0;
  for (int l = 0; l < base.n_layers; l++)
    for (LoraTarget t : targets_) {
      auto [out, in] = lora_target_shape(base, t);
      LoraTensor lt{l, t, out, in, offset, 0};
      offset += align16(size_t(rank) * size_t(in));
      lt.b_offset = offset;
      offset += align16(size_t(out) * size_t(rank));
      tensors_.push_back(lt);
    }
  size_ = offset;
  data_.reset(new float[std::max<size_t>(size_, 1)](), std::default_delete<float[]>());
}

void LoraAdapter::init(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::memset(data(), 0, size_ * sizeof(float));
  for (const LoraTensor& t : tensors_) {
    // kaiming_uniform(a=√5) on a [r, in] weight: bound = √(6/((1+a²)·in)) = 1/√in.
    std::uniform_real_distribution<float> u(-1.0f / std::sqrt(float(t.in)), 1.0f / std::sqrt(float(t.in)));
    float* a = A(t);
    for (size_t i = 0; i < size_t(rank_) * size_t(t.in); i++) a[i] = u(rng);
  }
}

bool LoraAdapter::has(LoraTarget t) const {
  for (LoraTarget x : targets_)
    if (x == t) return true;
  return false;
}

const LoraTensor* LoraAdapter::find(int layer, LoraTarget t) const {
  for (const LoraTensor& x : tensors_)
    if (x.layer == layer && x.target == t) return &x;
  return nullptr;
}

size_t LoraAdapter::num_params() const {
  size_t n = 0;
  for (const LoraTensor& t : tensors_) n += size_t(rank_) * size_t(t.in + t.out);
  return n;
}

LoraAdapter LoraAdapter::clone() const {
  LoraAdapter a(base_, rank_, alpha_, targets_);
  std::memcpy(a.data(), data(), size_ * sizeof(float));
  return a;
}

void LoraAdapter::check_fits(const ModelConfig& c, const std::string& source) const {
  auto mismatch = [&](const char* field, long long have, long long want) {
    throw_input_error(source, fmt::format("the adapter was made for {} = {}, the model has {}", field, have, want), field,
                      -1, "use the base model the adapter was trained on");
  };
  if (c.arch != base_.arch)
    throw_input_error(source,
                      fmt::format("the adapter is for {} models, the model is {}", arch_name(base_.arch), arch_name(c.arch)),
                      "arch", -1, "use the base model the adapter was trained on");
  if (c.n_layers != base_.n_layers) mismatch("n_layers", base_.n_layers, c.n_layers);
  for (LoraTarget t : targets_) {
    auto want = lora_target_shape(c, t), have = lora_target_shape(base_, t);
    if (want != have)
      throw_input_error(source,
                        fmt::format("target {} is [{}, {}] in the adapter, [{}, {}] in the model", lora_target_name(t),
                                    have.first, have.second, want.first, want.second),
                        lora_target_name(t), -1, "use the base model the adapter was trained on");
  }
}

std::string LoraAdapter::describe() const {
  std::string names;
  for (LoraTarget t : targets_) names += (names.empty() ? "" : ",") + std::string(lora_target_name(t));
  return fmt::format("LoRA r={} alpha={:g} (s={:g}) on {} of {} layers: {} parameters", rank_, alpha_, scale(), names,
                     base_.n_layers, num_params());
}

void lora_merge_matrix(float* merged, const float* base, const float* A, const float* B, int64_t out, int64_t in, int rank,
                       float s) {
#pragma omp parallel for schedule(static) if (out * in * rank > (1 << 18))
  for (int64_t o = 0; o < out; o++) {
    float* dst = merged + o * in;
    const float* src = base + o * in;
    if (dst != src) std::memcpy(dst, src, size_t(in) * sizeof(float));
    for (int k = 0; k < rank; k++) {
      const float coef = s * B[o * rank + k];  // s·B[o, k]
      if (coef == 0.0f) continue;              // B = 0 leaves W bit for bit
      const float* a = A + int64_t(k) * in;    // row k of A
      for (int64_t i = 0; i < in; i++) dst[i] += coef * a[i];
    }
  }
}

ModelWeights merge_lora(const ModelWeights& base, const LoraAdapter& adapter, float scale_mult) {
  adapter.check_fits(base.config, "adapter");
  ModelWeights w = base;  // shares every tensor; the adapted matrices are replaced below
  const float s = adapter.scale() * scale_mult;
  for (const LoraTensor& t : adapter.tensors()) {
    Tensor& W = lora_base_matrix(w.layers[size_t(t.layer)], t.target);
    void* p;
    Tensor merged = w.alloc_tensor(W.shape, DType::F32, &p);
    convert_dtype(W.data, W.dtype, p, DType::F32, size_t(W.numel()));
    lora_merge_matrix(static_cast<float*>(p), static_cast<const float*>(p), adapter.A(t), adapter.B(t), t.out, t.in,
                      adapter.rank(), s);
    W = W.dtype == DType::F32 ? merged : w.copy_as(merged, W.dtype);
  }
  return w;
}

}  // namespace orion
