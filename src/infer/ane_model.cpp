// AneModel: the transformer blocks as ANE programs, the rest on the CPU (see ane_model.h for the
// split). Host tensors are row-major [n, C] like the Transformer's; kernels speak [1, C, 1, S]
// (channel c is a row of S sequence positions), so every call transposes on the way in and out.
#include "infer/ane_model.h"

#include <algorithm>

#include "base/error.h"
#include "compiler/compile.h"
#include "compiler/sequence_bucket.h"
#include "model/frontends/frontends.h"
#include "model/frontends/lora_frontends.h"
#include "model/lora/lora.h"
#include "runtime/ane_layout.h"
#include "runtime/cpu/kernels.h"

namespace orion {
namespace {

using runtime::TensorMap;
using runtime::ane_to_rows;
using runtime::rows_to_ane;

// The graph builders by role, with the frontends' default options (fp16 activations).
ir::Graph build_gpt2_prefill_attn(const ModelWeights& w, int l, int S) { return frontends::gpt2_prefill_attn(w, l, S); }
ir::Graph build_gpt2_prefill_ffn(const ModelWeights& w, int l, int S) { return frontends::gpt2_prefill_ffn(w, l, S); }
ir::Graph build_gpt2_decode_qkv(const ModelWeights& w, int l, int S) { return frontends::gpt2_decode_qkv(w, l, S); }
ir::Graph build_gpt2_decode_ffn(const ModelWeights& w, int l, int S) { return frontends::gpt2_decode_ffn(w, l, S); }
ir::Graph build_stories_fwd_attn(const ModelWeights& w, int l, int S) { return frontends::stories_fwd_attn(w, l, S); }
ir::Graph build_stories_fwd_ffn(const ModelWeights& w, int l, int S) { return frontends::stories_fwd_ffn(w, l, S); }
ir::Graph build_final_norm(const ModelWeights& w, int, int S) { return frontends::final_norm(w, S); }

bool is_gpt2(const ModelConfig& c) { return c.arch == Arch::GPT2; }

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
    : w_(w), cache_(cache), opt_(std::move(opt)),
      max_seq_(opt_.max_seq > 0 ? std::min(opt_.max_seq, w.config.seq_len) : w.config.seq_len),
      kv_dim_(w.config.kv_dim()) {
  const ModelConfig& c = w_.config;
  const compiler::ChipProfile& chip = cache_.driver().chip();
  const Build attn = is_gpt2(c) ? build_gpt2_prefill_attn : build_stories_fwd_attn;
  attn_min_ = compiler::smallest_legal_bucket(compiler::kSmallestSequenceBucket, chip, [&](int S) {
    return std::vector<ir::Graph>{attn(w_, 0, S)};
  });
  if (attn_min_ == 0)
    throw Error(ErrorKind::Runtime,
                fmt::format("no sequence bucket up to {} lets the attention kernel of {} reach the {}-byte minimum buffer (C7)",
                            chip.max_sequence_bucket, opt_.model_name, chip.min_buffer_bytes),
                {opt_.model_name, "backend", -1, "use --backend cpu for this model"});
  const size_t L = size_t(c.n_layers), Q = size_t(c.n_heads) * c.head_dim();
  q_.resize(Q), att_.resize(Q), o_.resize(size_t(c.dim));
  key_cache_.assign(L * max_seq_ * kv_dim_, 0.0f), value_cache_.assign(L * max_seq_ * kv_dim_, 0.0f);
  logits_.resize(size_t(c.vocab_size));
}

int AneModel::prefill_bucket(int n) const {
  const int64_t S = compiler::sequence_bucket_at_least(n, cache_.driver().chip());
  ORION_CHECK(S > 0, "a prompt of {} tokens is beyond the largest sequence bucket", n);
  return std::max(int(S), attn_min_);
}

// --- programs ------------------------------------------------------------------------------------

AneModel::Kernel AneModel::program(const std::string& kernel, int layer, int S, const Build& build) {
  runtime::ProgramKey key{opt_.model_name, kernel, layer, S, opt_.weights_version};
  return cache_.get(key, [&] { return build(w_, layer, S); });
}

AneModel::Kernel AneModel::attn_prefill(int l, int S) {
  if (lora_slot_ > 0) {
    const int slot = lora_slot_;
    return program(fmt::format("lora_prefill_attn_r{}", slot), l, S,
                   [slot](const ModelWeights& w, int layer, int s) { return frontends::lora_prefill_attn(w, layer, s, slot); });
  }
  return is_gpt2(w_.config) ? program("gpt2_prefill_attn", l, S, build_gpt2_prefill_attn)
                            : program("stories_fwd_attn", l, S, build_stories_fwd_attn);
}
AneModel::Kernel AneModel::ffn_prefill(int l, int S) {
  return is_gpt2(w_.config) ? program("gpt2_prefill_ffn", l, S, build_gpt2_prefill_ffn)
                            : program("stories_fwd_ffn", l, S, build_stories_fwd_ffn);
}
AneModel::Kernel AneModel::attn_decode(int l) {
  if (lora_slot_ > 0) {  // at the attention bucket: its buffers reach the minimum without padding
    const int slot = lora_slot_;
    return program(fmt::format("lora_decode_qkv_r{}", slot), l, attn_min_,
                   [slot](const ModelWeights& w, int layer, int s) { return frontends::lora_decode_qkv(w, layer, s, slot); });
  }
  return is_gpt2(w_.config) ? program("gpt2_decode_qkv", l, kDecodeBucket, build_gpt2_decode_qkv)
                            : program("stories_fwd_attn", l, attn_min_, build_stories_fwd_attn);
}
AneModel::Kernel AneModel::ffn_decode(int l) {
  return is_gpt2(w_.config) ? program("gpt2_decode_ffn", l, kDecodeBucket, build_gpt2_decode_ffn)
                            : program("stories_fwd_ffn", l, kDecodeBucket, build_stories_fwd_ffn);
}
AneModel::Kernel AneModel::norm_final() { return program("final_norm", -1, kDecodeBucket, build_final_norm); }

int AneModel::decode_qkv_bucket() const { return lora_slot_ > 0 || !is_gpt2(w_.config) ? attn_min_ : kDecodeBucket; }

void AneModel::enable_lora(int rank_slot) {
  if (rank_slot < 1) throw_usage_error(fmt::format("LoRA rank slot {} must be at least 1", rank_slot), "--lora");
  lora_slot_ = rank_slot;
  set_lora(nullptr);
}

void AneModel::set_lora(const LoraAdapter* a, float scale_mult) {
  const ModelConfig& c = w_.config;
  if (a) {
    if (lora_slot_ == 0) enable_lora(a->rank());
    a->check_fits(c, "adapter");
    for (LoraTarget t : a->targets())
      if (t != LoraTarget::Q && t != LoraTarget::V)
        throw_usage_error(fmt::format("the ANE path applies adapters on q and v; this one also adapts {}", lora_target_name(t)),
                          "--lora", "use --backend cpu, or fold the adapter in with `orion lora merge`");
    if (a->rank() > lora_slot_)
      throw_usage_error(fmt::format("adapter rank {} is above the compiled rank slot {}", a->rank(), lora_slot_), "--lora",
                        "load the adapter of the highest rank first (the slot is the largest rank given)");
  }
  lora_inputs_.assign(size_t(c.n_layers), {});
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

int AneModel::prepare(int prompt_tokens) {
  std::vector<Kernel> used;
  for (int l = 0; l < w_.config.n_layers; l++) {
    if (prompt_tokens > 1) {
      int S = prefill_bucket(std::min(prompt_tokens, max_seq_));
      used.push_back(attn_prefill(l, S)), used.push_back(ffn_prefill(l, S));
    }
    used.push_back(attn_decode(l)), used.push_back(ffn_decode(l));
  }
  used.push_back(norm_final());
  std::sort(used.begin(), used.end());
  return int(std::unique(used.begin(), used.end()) - used.begin());
}

// --- forward -------------------------------------------------------------------------------------

void AneModel::check_tokens(const int* tokens, int n, int pos) const {
  if (n <= 0) throw_usage_error("no tokens to run", "prompt", "give a non-empty prompt");
  if (pos < 0 || pos + n > max_seq_)
    throw_usage_error(fmt::format("sequence of {} tokens exceeds the model's context of {}", pos + n, max_seq_), "n",
                      "ask for fewer tokens or use a shorter prompt");
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= w_.config.vocab_size)
      throw_usage_error(fmt::format("token id {} is outside the model's vocabulary of {}", tokens[i], w_.config.vocab_size),
                        "tokens", "the tokenizer does not belong to this model");
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

// CPU: x[t] = tok_emb[token t] (+ pos_emb[pos + t] for GPT-2) — table lookups.
void AneModel::embed(const int* tokens, int n, int pos) {
  const ModelConfig& c = w_.config;
  const int C = c.dim;
  x_.assign(size_t(n) * C, 0.0f);
  for (int t = 0; t < n; t++) {
    float* xt = x_.data() + size_t(t) * C;
    cpu::embedding_row(xt, w_.tok_emb.data, w_.tok_emb.dtype, tokens[t], C);
    if (is_gpt2(c)) {
      cpu::embedding_row(o_.data(), w_.pos_emb.data, w_.pos_emb.dtype, pos + t, C);
      cpu::add_inplace(xt, o_.data(), size_t(C));
    }
  }
}

void AneModel::prefill(int n) {
  const int S = prefill_bucket(n);
  for (int l = 0; l < w_.config.n_layers; l++) {
    if (is_gpt2(w_.config))
      gpt2_prefill_layer(l, n, S);
    else
      llama_prefill_layer(l, n, S);
  }
}

void AneModel::decode(int pos) {
  for (int l = 0; l < w_.config.n_layers; l++) {
    if (is_gpt2(w_.config))
      gpt2_decode_layer(l, pos);
    else
      llama_decode_layer(l, pos);
  }
}

// ANE: y = x + attention(ln1(x)) with k, v for the cache; then y + ffn(ln2(y)).
void AneModel::gpt2_prefill_layer(int l, int n, int S) {
  TensorMap a = attn_prefill(l, S)->run(with_lora(l, {{"x", rows_to_ane(x_.data(), n, w_.config.dim, S)}}));
  ane_to_rows(a.at("k"), n, k_cache(l, 0));  // rows 0..n−1 of the cache, [n, C]
  ane_to_rows(a.at("v"), n, v_cache(l, 0));
  // The FFN is position-wise, so y's padding columns (finite, meaningless) cannot reach real ones.
  TensorMap f = ffn_prefill(l, S)->run({{"x", std::move(a.at("y"))}});
  ane_to_rows(f.at("y"), n, x_.data());
}

// ANE: o = Wo·attention(rmsnorm(x)) with k, v after RoPE; CPU: h = x + o; ANE: y = ffn(h);
// CPU: x = h + y (the training kernels leave the residual adds to the CPU).
void AneModel::llama_prefill_layer(int l, int n, int S) {
  const int C = w_.config.dim;
  TensorMap a = attn_prefill(l, S)->run(with_lora(l, {{"x", rows_to_ane(x_.data(), n, C, S)}}));
  ane_to_rows(a.at("k"), n, k_cache(l, 0));
  ane_to_rows(a.at("v"), n, v_cache(l, 0));
  if (lora_slot_ > 0)
    ane_to_rows(a.at("y"), n, x_.data());  // the LoRA kernel returns h = x + o itself
  else
    ane_to_rows(a.at("o"), n, x_.data(), /*accumulate=*/true);
  TensorMap f = ffn_prefill(l, S)->run({{"x", rows_to_ane(x_.data(), n, C, S)}});
  ane_to_rows(f.at("y"), n, x_.data(), /*accumulate=*/true);
}

// ANE: q, k, v = W·ln1(x) + b; CPU: k, v into the cache, att = softmax(q·Kᵀ/√HS)·V over
// positions 0..pos; ANE: x = h + ffn(ln2(h)) with h = x + Wo·att + bo.
void AneModel::gpt2_decode_layer(int l, int pos) {
  const ModelConfig& c = w_.config;
  const int C = c.dim, S = kDecodeBucket;
  float* x = x_.data();
  TensorMap p = attn_decode(l)->run(with_lora(l, {{"x", rows_to_ane(x, 1, C, decode_qkv_bucket())}}));
  ane_to_rows(p.at("q"), 1, q_.data());
  ane_to_rows(p.at("k"), 1, k_cache(l, pos));
  ane_to_rows(p.at("v"), 1, v_cache(l, pos));
  cpu::attention(att_.data(), q_.data(), k_cache(l, 0), v_cache(l, 0), 1, pos, c.n_heads, c.n_kv_heads, c.head_dim(), kv_dim_);
  TensorMap f = ffn_decode(l)->run({{"x", rows_to_ane(x, 1, C, S)}, {"att", rows_to_ane(att_.data(), 1, C, S)}});
  ane_to_rows(f.at("y"), 1, x);
}

// ANE: fwd_attn with the token in column 0 — position 0, where RoPE is the identity — gives the
// plain projections q, k, v of rmsnorm(x). CPU: rotate q, k to `pos`, cache k, v, attend, h = x +
// Wo·att. ANE: y = ffn(h) at the decode bucket. CPU: x = h + y.
void AneModel::llama_decode_layer(int l, int pos) {
  const ModelConfig& c = w_.config;
  const LayerWeights& lw = w_.layers[size_t(l)];
  const int C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS;
  float* x = x_.data();
  TensorMap p = attn_decode(l)->run(with_lora(l, {{"x", rows_to_ane(x, 1, C, attn_min_)}}));
  ane_to_rows(p.at("q"), 1, q_.data());
  ane_to_rows(p.at("k"), 1, k_cache(l, pos));
  ane_to_rows(p.at("v"), 1, v_cache(l, pos));
  cpu::rope(q_.data(), c.n_heads, HS, pos, c.rope_theta);
  cpu::rope(k_cache(l, pos), c.n_kv_heads, HS, pos, c.rope_theta);
  cpu::attention(att_.data(), q_.data(), k_cache(l, 0), v_cache(l, 0), 1, pos, c.n_heads, c.n_kv_heads, HS, kv_dim_);
  cpu::matmul(o_.data(), att_.data(), lw.wo.data, lw.wo.dtype, nullptr, 1, Q, C);  // Wo·att  [C]
  cpu::add_inplace(x, o_.data(), size_t(C));                                       // h = x + Wo·att
  TensorMap f = ffn_decode(l)->run({{"x", rows_to_ane(x, 1, C, kDecodeBucket)}});
  ane_to_rows(f.at("y"), 1, x, /*accumulate=*/true);
}

// ANE: the final norm of one row (column 0 of the decode bucket). CPU: logits = W_cls·xnorm over
// the real vocabulary — 32000 / 50257 output channels are more than the ANE takes (C12).
void AneModel::logits_of_row(int row) {
  const ModelConfig& c = w_.config;
  const int C = c.dim;
  TensorMap y = norm_final()->run({{"x", rows_to_ane(x_.data() + size_t(row) * C, 1, C, kDecodeBucket)}});
  ane_to_rows(y.at("y"), 1, o_.data());
  cpu::matmul(logits_.data(), o_.data(), w_.classifier.data, w_.classifier.dtype, nullptr, 1, C, c.vocab_size);
}

}  // namespace orion
