// AneModel: the transformer blocks as ANE programs, the rest on the CPU (see ane_model.h for the
// split). Host tensors are row-major [n, C] like the Transformer's; kernels speak [1, C, 1, S]
// (channel c is a row of S sequence positions), so every call transposes on the way in and out.
#include "infer/ane_model.h"

#include <algorithm>

#include "base/error.h"
#include "compiler/compile.h"
#include "compiler/sequence_bucket.h"
#include "model/family/family.h"
#include "model/family/llama/llama.h"
#include "model/frontends/frontends.h"
#include "model/frontends/lora_frontends.h"
#include "model/frontends/program_set.h"
#include "model/lora/lora.h"
#include "runtime/ane_layout.h"
#include "runtime/cpu/kernels.h"

namespace orion {
namespace {

using runtime::ane_to_rows;
using runtime::rows_to_ane;
using runtime::TensorMap;

// True when the model's inference table holds its family's own inference kernels (residual adds
// and decode kernels inside the programs); false: its training kernels (model/family/family.h).
bool own_inference_kernels(const ModelConfig& c) { return model_family(c.arch).ane_inference_kernels(); }

}  // namespace

AneRuntime::AneRuntime(const std::string& driver_name, const std::string& chip)
    : driver(runtime::make_driver(driver_name, {&compiler::chip_profile(chip)})),
      budget(runtime::CompileBudget::for_driver(*driver)),
      cache(*driver, budget) {}

std::string AneRuntime::summary() const {
  const runtime::DriverCounters& n = driver->counters();
  return fmt::format("{} | {} | {} predicted ANE time {:.1f} ms over {} evaluations", cache.stats().str(), budget.str(),
                     driver->name(), n.predicted_ane_ms, n.evaluations);
}

AneModel::AneModel(const ModelWeights& w, runtime::ProgramCache& cache, AneModelOptions opt)
    : w_(w),
      cache_(cache),
      opt_(std::move(opt)),
      max_seq_(opt_.max_seq > 0 ? std::min(opt_.max_seq, w.config.seq_len) : w.config.seq_len),
      kv_dim_(w.config.kv_dim()) {
  const ModelConfig& c = w_.config;
  const compiler::ChipProfile& chip = cache_.driver().chip();
  kernels_ = frontends::inference_kernels(c.arch);
  attn_min_ = frontends::inference_attention_bucket(w_, chip);
  if (attn_min_ == 0)
    throw Error(
        ErrorKind::Runtime,
        fmt::format("no sequence bucket up to {} lets the attention kernel of {} reach the {}-byte minimum buffer (C7)",
                    chip.max_sequence_bucket, opt_.model_name, chip.min_buffer_bytes),
        {opt_.model_name, "backend", -1, "use --backend cpu for this model"});
  const size_t L = size_t(c.n_layers), Q = size_t(c.n_heads) * c.head_dim();
  q_.resize(Q), att_.resize(Q), o_.resize(size_t(c.dim));
  key_cache_.assign(L * max_seq_ * kv_dim_, 0.0f), value_cache_.assign(L * max_seq_ * kv_dim_, 0.0f);
  logits_.resize(size_t(c.vocab_size));
}

int AneModel::prefill_bucket(int n) const { return frontends::prefill_bucket(n, attn_min_, cache_.driver().chip()); }

// --- programs ------------------------------------------------------------------------------------

AneModel::Kernel AneModel::program(frontends::InferenceRole role, int layer, int S) {
  return program(kernels_[size_t(role)], layer, S);
}

AneModel::Kernel AneModel::program(const frontends::KernelSpec& k, int layer, int S) {
  if (!k.per_layer) layer = -1;
  runtime::ProgramKey key{opt_.model_name, k.kernel, layer, S, opt_.weights_version};
  return cache_.get(key, [&] { return k.build(w_, layer, S); });
}

int AneModel::decode_qkv_bucket() const { return frontends::decode_attention_bucket(w_.config.arch, lora_slot_, attn_min_); }

void AneModel::enable_lora(int rank_slot) {
  if (rank_slot < 1) throw_usage_error(fmt::format("LoRA rank slot {} must be at least 1", rank_slot), "--lora");
  // lora_decode_qkv computes the plain projections only (no per-head q/k norms).
  w_.config.require_plain_blocks(opt_.model_name, "LoRA on the ANE path");
  lora_slot_ = rank_slot;
  kernels_ = frontends::inference_kernels(w_.config.arch, lora_slot_);
  set_lora(nullptr);
}

void AneModel::check_lora(const LoraAdapter& a) const {
  a.check_fits(w_.config, "adapter");
  for (LoraTarget t : a.targets())
    if (t != LoraTarget::Q && t != LoraTarget::V)
      throw_usage_error(fmt::format("the ANE path applies adapters on q and v; this one also adapts {}", lora_target_name(t)),
                        "--lora", "use --backend cpu, or fold the adapter in with `orion lora merge`");
  if (a.rank() > lora_slot_)
    throw_usage_error(fmt::format("adapter rank {} is above the compiled rank slot {}", a.rank(), lora_slot_), "--lora",
                      "load the adapter of the highest rank first (the slot is the largest rank given)");
}

void AneModel::set_lora(const LoraAdapter* a, float scale_mult) {
  const ModelConfig& c = w_.config;
  if (a) {
    if (lora_slot_ == 0) enable_lora(a->rank());
    check_lora(*a);
  }
  lora_inputs_.assign(size_t(c.n_layers), {});
  lora_adapter_ = a, lora_scale_mult_ = scale_mult;
  if (lora_slot_ == 0) return;  // no adapter, and the programs have no slot to feed: nothing to do
  for (int l = 0; l < c.n_layers; l++) {
    const LoraTensor* q = a ? a->find(l, LoraTarget::Q) : nullptr;
    const LoraTensor* v = a ? a->find(l, LoraTarget::V) : nullptr;
    lora_inputs_[size_t(l)] = frontends::lora_qv_inputs(c, lora_slot_, a ? a->rank() : 0, a ? a->scale() * scale_mult : 0.0f,
                                                        q ? a->A(*q) : nullptr, q ? a->B(*q) : nullptr,
                                                        v ? a->A(*v) : nullptr, v ? a->B(*v) : nullptr);
  }
}

TensorMap AneModel::with_lora(int layer, TensorMap inputs) const {
  if (lora_slot_ > 0)
    for (const auto& [name, t] : lora_inputs_[size_t(layer)]) inputs[name] = t;
  return inputs;
}

std::vector<frontends::ProgramSpec> AneModel::programs(int prompt_tokens, int decode_rows, int adapter_slots) const {
  return frontends::inference_programs(w_, std::min(prompt_tokens, max_seq_), attn_min_, cache_.driver().chip(), lora_slot_,
                                       decode_rows, adapter_slots);
}

// By the specs' own kernels: a decode batch's projections kernel is not in the role table.
int AneModel::prepare(int prompt_tokens, int decode_rows, int adapter_slots) {
  const std::vector<frontends::ProgramSpec> specs = programs(prompt_tokens, decode_rows, adapter_slots);
  for (const frontends::ProgramSpec& p : specs)
    cache_.get({opt_.model_name, p.kernel, p.layer, p.S, opt_.weights_version}, p.build);
  return int(specs.size());
}

// --- forward -------------------------------------------------------------------------------------

void AneModel::check_tokens(const int* tokens, int n, int pos) const {
  check_forward_tokens(tokens, n, pos, max_seq_, w_.config.vocab_size);
}

const float* AneModel::forward(const int* tokens, int n, int pos) {
  check_tokens(tokens, n, pos);
  if (n > 1 && pos == 0) {  // a fresh prompt: one pass of the prefill programs over the bucket
    embed(tokens, n, 0);
    prefill(n);
    logits_of_row(n - 1);
  } else {  // decode; several tokens after position 0 go through the decode programs one by one
    for (int i = 0; i < n; i++) {
      embed(tokens + i, 1, pos + i);
      decode(pos + i);
    }
    logits_of_row(0);
  }
  return logits_.data();
}

// CPU: x[t] = tok_emb[token t] (+ pos_emb[pos + t] with learned positions) — table lookups.
void AneModel::embed(const int* tokens, int n, int pos) {
  const ModelConfig& c = w_.config;
  const int C = c.dim;
  x_.assign(size_t(n) * C, 0.0f);
  for (int t = 0; t < n; t++) {
    float* xt = x_.data() + size_t(t) * C;
    cpu::embedding_row(xt, w_.tok_emb.data, w_.tok_emb.dtype, tokens[t], C);
    if (model_family(c.arch).anatomy().positions == Positions::Learned) {
      cpu::embedding_row(o_.data(), w_.pos_emb.data, w_.pos_emb.dtype, pos + t, C);
      cpu::add_inplace(xt, o_.data(), size_t(C));
    }
  }
}

void AneModel::prefill(int n) {
  const int S = prefill_bucket(n);
  for (int l = 0; l < w_.config.n_layers; l++) {
    if (own_inference_kernels(w_.config)) prefill_layer_inference_kernels(l, n, S);
    else prefill_layer_training_kernels(l, n, S);
  }
}

void AneModel::decode(int pos) {
  for (int l = 0; l < w_.config.n_layers; l++) {
    if (own_inference_kernels(w_.config)) decode_layer_inference_kernels(l, pos);
    else decode_layer_training_kernels(l, pos);
  }
}

// ANE: y = x + attention(norm1(x)) with k, v for the cache; then y + ffn(norm2(y)) (GPT-2's kernels).
void AneModel::prefill_layer_inference_kernels(int l, int n, int S) {
  TensorMap a =
      program(frontends::kPrefillAttn, l, S)->run(with_lora(l, {{"x", rows_to_ane(x_.data(), n, w_.config.dim, S)}}));
  ane_to_rows(a.at("k"), n, k_cache(l, 0));  // rows 0..n−1 of the cache, [n, C]
  ane_to_rows(a.at("v"), n, v_cache(l, 0));
  // The FFN is position-wise, so y's padding columns (finite, meaningless) cannot reach real ones.
  TensorMap f = program(frontends::kPrefillFfn, l, S)->run({{"x", std::move(a.at("y"))}});
  ane_to_rows(f.at("y"), n, x_.data());
}

// ANE: o = Wo·attention(norm1(x)) with k, v after RoPE; CPU: h = x + o; ANE: y = ffn(h);
// CPU: x = h + y (the training kernels leave the residual adds to the CPU; Llama's kernels).
void AneModel::prefill_layer_training_kernels(int l, int n, int S) {
  const int C = w_.config.dim;
  TensorMap a = program(frontends::kPrefillAttn, l, S)->run(with_lora(l, {{"x", rows_to_ane(x_.data(), n, C, S)}}));
  ane_to_rows(a.at("k"), n, k_cache(l, 0));
  ane_to_rows(a.at("v"), n, v_cache(l, 0));
  if (lora_slot_ > 0) ane_to_rows(a.at("y"), n, x_.data());  // the LoRA kernel returns h = x + o itself
  else ane_to_rows(a.at("o"), n, x_.data(), /*accumulate=*/true);
  TensorMap f = program(frontends::kPrefillFfn, l, S)->run({{"x", rows_to_ane(x_.data(), n, C, S)}});
  ane_to_rows(f.at("y"), n, x_.data(), /*accumulate=*/true);
}

// ANE: q, k, v = W·norm1(x) + b; CPU: k, v into the cache, att = softmax(q·Kᵀ/√HS)·V over
// positions 0..pos; ANE: x = h + ffn(norm2(h)) with h = x + Wo·att + bo.
void AneModel::decode_layer_inference_kernels(int l, int pos) {
  const ModelConfig& c = w_.config;
  const int C = c.dim, S = frontends::kDecodeBucket;
  float* x = x_.data();
  const int Sq = decode_qkv_bucket();
  TensorMap p = program(frontends::kDecodeAttn, l, Sq)->run(with_lora(l, {{"x", rows_to_ane(x, 1, C, Sq)}}));
  ane_to_rows(p.at("q"), 1, q_.data());
  ane_to_rows(p.at("k"), 1, k_cache(l, pos));
  ane_to_rows(p.at("v"), 1, v_cache(l, pos));
  attend(l, pos);
  TensorMap f = program(frontends::kDecodeFfn, l, S)
                    ->run({{"x", rows_to_ane(x, 1, C, S)}, {"att", rows_to_ane(att_.data(), 1, C, S)}});
  ane_to_rows(f.at("y"), 1, x);
}

// ANE: fwd_attn with the token in column 0 — position 0, where RoPE is the identity — gives the
// projections q, k, v of norm1(x) (with their biases and per-head norms). CPU: rotate q, k to `pos`
// (RoPE families), cache k, v, attend (over the sliding window, if any), h = x + Wo·att. ANE: y = ffn(h) at the decode bucket. CPU: x = h + y.
void AneModel::decode_layer_training_kernels(int l, int pos) {
  const ModelConfig& c = w_.config;
  const LayerWeights& lw = w_.layers[size_t(l)];
  const int C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS;
  float* x = x_.data();
  TensorMap p = program(frontends::kDecodeAttn, l, attn_min_)->run(with_lora(l, {{"x", rows_to_ane(x, 1, C, attn_min_)}}));
  ane_to_rows(p.at("q"), 1, q_.data());
  ane_to_rows(p.at("k"), 1, k_cache(l, pos));
  ane_to_rows(p.at("v"), 1, v_cache(l, pos));
  attend(l, pos);
  cpu::matmul(o_.data(), att_.data(), lw.wo.data, lw.wo.dtype, nullptr, 1, Q, C);  // Wo·att  [C]
  cpu::add_inplace(x, o_.data(), size_t(C));                                       // h = x + Wo·att
  constexpr int S = frontends::kDecodeBucket;
  TensorMap f = program(frontends::kDecodeFfn, l, S)->run({{"x", rows_to_ane(x, 1, C, S)}});
  ane_to_rows(f.at("y"), 1, x, /*accumulate=*/true);
}

void AneModel::attend(int l, int pos) {
  const ModelConfig& c = w_.config;
  const int HS = c.head_dim();
  if (model_family(c.arch).anatomy().positions == Positions::Rope) {  // the config's (scaled) frequencies
    std::vector<float> cs(static_cast<size_t>(HS));
    cpu::rope_angles(cs.data(), llama_rope_frequencies(c).data(), HS, pos);
    cpu::rope_rotate(q_.data(), cs.data(), HS, 0, c.n_heads * HS);
    cpu::rope_rotate(k_cache(l, pos), cs.data(), HS, 0, kv_dim_);
  }
  cpu::attention(att_.data(), q_.data(), k_cache(l, 0), v_cache(l, 0), 1, pos, c.n_heads, c.n_kv_heads,
                 cpu::KvLayout::rows(kv_dim_, HS), c.sliding_window);
}

// ANE: the final norm of one row (column 0 of the decode bucket). CPU: logits = W_cls·xnorm over
// the real vocabulary — 32000 / 50257 output channels are more than the ANE takes (C12).
void AneModel::logits_of_row(int row) {
  const ModelConfig& c = w_.config;
  const int C = c.dim;
  constexpr int S = frontends::kDecodeBucket;
  TensorMap y = program(frontends::kFinalNorm, -1, S)->run({{"x", rows_to_ane(x_.data() + size_t(row) * C, 1, C, S)}});
  ane_to_rows(y.at("y"), 1, o_.data());
  cpu::matmul(logits_.data(), o_.data(), w_.classifier.data, w_.classifier.dtype, nullptr, 1, C, c.vocab_size);
}

}  // namespace orion
