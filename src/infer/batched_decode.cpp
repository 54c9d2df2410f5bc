#include "infer/batched_decode.h"

#include <algorithm>

#include "base/error.h"
#include "infer/language_model.h"
#include "model/family/family.h"
#include "model/family/llama/llama.h"
#include "runtime/cpu/kernels.h"

namespace orion {
namespace {
const float* bias_of(const Tensor& b) { return b.empty() ? nullptr : b.f32(); }
}  // namespace

BatchedDecoder::BatchedDecoder(const ModelWeights& weights, int slots, int max_seq, DType kv_cache)
    : w_(weights),
      slots_(slots),
      max_seq_(max_seq > 0 ? std::min(max_seq, weights.config.seq_len) : weights.config.seq_len),
      kv_dim_(weights.config.kv_dim()),
      layers_(weights.config.n_layers),
      max_rows_(slots + kPromptRows) {
  ORION_CHECK(slots >= 1, "batched decoder with {} slots", slots);
  const ModelConfig& c = w_.config;
  const size_t rows = size_t(std::max(Transformer::kChunk, max_rows_)), C = c.dim, Q = size_t(c.n_heads) * c.head_dim();
  a_.x.resize(rows * C), a_.xb.resize(rows * C), a_.q.resize(rows * Q), a_.att.resize(rows * Q);
  a_.hb.resize(rows * c.hidden_dim), a_.hb2.resize(rows * c.hidden_dim);
  a_.k.resize(rows * kv_dim_), a_.v.resize(rows * kv_dim_);
  for (int s = 0; s < slots; s++) caches_.emplace_back(c, max_seq_, kv_cache);
  if (model_family(c.arch).anatomy().positions == Positions::Rope) rope_freq_ = llama_rope_frequencies(c);
}

void BatchedDecoder::check_tokens(const int* tokens, int n, int pos) const {
  check_forward_tokens(tokens, n, pos, max_seq_, w_.config.vocab_size);
}

// x[t] = tok_emb[tokens[t]] (+ pos_emb[positions[t]] with learned positions)
void BatchedDecoder::embed(const int* tokens, const int* positions, int n) {
  const int C = w_.config.dim;
  const bool learned = model_family(w_.config.arch).anatomy().positions == Positions::Learned;
  std::vector<float> p(learned ? size_t(C) : 0);
  for (int t = 0; t < n; t++) {
    float* xt = a_.x.data() + size_t(t) * C;
    cpu::embedding_row(xt, w_.tok_emb.data, w_.tok_emb.dtype, tokens[t], C);
    if (!learned) continue;
    cpu::embedding_row(p.data(), w_.pos_emb.data, w_.pos_emb.dtype, positions[t], C);
    cpu::add_inplace(xt, p.data(), size_t(C));
  }
}

// logits [rows, V] = final_norm(x) · classifierᵀ
void BatchedDecoder::classify(const float* x, int rows, float* logits) {
  const ModelConfig& c = w_.config;
  if (model_family(c.arch).anatomy().norm == NormKind::RMSNorm)
    cpu::rmsnorm(a_.xb.data(), x, w_.final_norm.f32(), rows, c.dim, c.norm_eps);
  else cpu::layernorm(a_.xb.data(), x, w_.final_norm.f32(), w_.final_norm_b.f32(), rows, c.dim, c.norm_eps);
  cpu::matmul(logits, a_.xb.data(), w_.classifier.data, w_.classifier.dtype, nullptr, rows, c.dim, c.vocab_size);
}

// lora_add's scratch must hold `rows` rows of the adapter's rank and of the widest projection.
void BatchedDecoder::reserve_lora(const LoraAdapter* adapter, int rows) {
  if (!adapter) return;
  const ModelConfig& c = w_.config;
  const size_t widest = size_t(std::max({c.dim, c.hidden_dim, c.n_heads * c.head_dim()}));
  if (a_.lora_ax.size() < size_t(rows) * adapter->rank()) a_.lora_ax.resize(size_t(rows) * adapter->rank());
  if (a_.lora_delta.size() < size_t(rows) * widest) a_.lora_delta.resize(size_t(rows) * widest);
}

const float* BatchedDecoder::prefill(int slot, const int* tokens, int n, const LoraAdapter* adapter, float scale_mult) {
  ORION_CHECK(slot >= 0 && slot < slots_, "slot {} of {}", slot, slots_);
  check_tokens(tokens, n, 0);
  const ModelFamily& family = model_family(w_.config.arch);
  std::vector<LoraLayerRef> refs;
  if (adapter) refs = lora_layer_refs(w_.config, *adapter, scale_mult);
  reserve_lora(adapter, Transformer::kChunk);
  std::vector<int> positions;
  for (int done = 0; done < n; done += Transformer::kChunk) {
    const int m = std::min(Transformer::kChunk, n - done);
    positions.resize(size_t(m));
    for (int t = 0; t < m; t++) positions[size_t(t)] = done + t;
    embed(tokens + done, positions.data(), m);
    for (int l = 0; l < layers_; l++)
      family.block_forward(w_.config, w_.layers[size_t(l)], a_, m, done, caches_[size_t(slot)], l,
                           adapter ? &refs[size_t(l)] : nullptr);
    if (done + m == n) {
      logits_.resize(size_t(w_.config.vocab_size));
      classify(a_.x.data() + size_t(m - 1) * w_.config.dim, 1, logits_.data());
    }
  }
  return logits_.data();
}

// Rows of one slot must come at consecutive positions, in row order; at most one row per slot
// besides kPromptRows prompt tokens.
void BatchedDecoder::check_rows(const std::vector<Row>& rows) const {
  const int B = int(rows.size());
  ORION_CHECK(B >= 1 && B <= max_rows_, "decode step of {} rows with {} slots", B, slots_);
  std::vector<int> last_pos(size_t(slots_), -1);
  int extra = 0;  // rows beyond the first of their slot
  for (const Row& r : rows) {
    ORION_CHECK(r.slot >= 0 && r.slot < slots_, "slot {} of {}", r.slot, slots_);
    int& last = last_pos[size_t(r.slot)];
    ORION_CHECK(last < 0 || r.pos == last + 1, "slot {} fed position {} after {} in one decode step", r.slot, r.pos, last);
    extra += last >= 0;
    last = r.pos;
    check_tokens(&r.token, 1, r.pos);
  }
  ORION_CHECK(extra <= kPromptRows, "decode step with {} prompt rows (at most {})", extra, kPromptRows);
}

const float* BatchedDecoder::decode(const std::vector<Row>& rows) {
  check_rows(rows);
  const int B = int(rows.size());
  std::vector<int> tokens, positions;
  std::vector<std::vector<LoraLayerRef>> lora(rows.size());
  for (size_t b = 0; b < rows.size(); b++) {
    const Row& r = rows[b];
    tokens.push_back(r.token), positions.push_back(r.pos);
    if (!r.adapter) continue;
    // Rows of one request share its adapter: build its per-layer references once.
    const bool same = b > 0 && rows[b - 1].adapter == r.adapter && rows[b - 1].scale_mult == r.scale_mult;
    lora[b] = same ? lora[b - 1] : lora_layer_refs(w_.config, *r.adapter, r.scale_mult);
    reserve_lora(r.adapter, 1);
  }
  embed(tokens.data(), positions.data(), B);
  const int wanted = int(std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.logits; }));
  logits_.resize(size_t(std::max(1, wanted)) * w_.config.vocab_size);
  // One row without an adapter: the family's single-token fast path, as `orion generate` runs it
  // (a slot's cache is a KvCache, as the Transformer's).
  if (B == 1 && !rows[0].adapter &&
      model_family(w_.config.arch).decode_token(w_, a_, rows[0].pos, caches_[size_t(rows[0].slot)], logits_.data()))
    return logits_.data();
  const bool adapters = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.adapter; });
  if (!adapters && B <= cpu::kFewTokens) decode_layers_together(rows);  // batched_step.cpp
  else
    for (int l = 0; l < layers_; l++) decode_block(l, rows, lora);
  if (wanted == B) {
    classify(a_.x.data(), B, logits_.data());
  } else if (wanted > 0) {  // only the rows whose logits are wanted go through the classifier
    const size_t C = size_t(w_.config.dim);
    wanted_x_.resize(size_t(wanted) * C);
    float* dst = wanted_x_.data();
    for (int b = 0; b < B; b++)
      if (rows[size_t(b)].logits) dst = std::copy(a_.x.data() + size_t(b) * C, a_.x.data() + size_t(b + 1) * C, dst);
    classify(wanted_x_.data(), wanted, logits_.data());
  }
  return logits_.data();
}

// One block for B rows, each its own sequence: the projections are [B, ·] products shared by every
// row; RoPE, the KV cache, attention and LoRA are per row. The same steps, in the same order, as the
// family blocks (llama_block.cpp, gpt2_block.cpp) run for one token.
void BatchedDecoder::decode_block(int layer, const std::vector<Row>& rows,
                                  const std::vector<std::vector<LoraLayerRef>>& lora) {
  const ModelConfig& c = w_.config;
  const LayerWeights& l = w_.layers[size_t(layer)];
  const Anatomy anatomy = model_family(c.arch).anatomy();
  const int B = int(rows.size()), C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS, KV = kv_dim_, H = c.hidden_dim;
  float* x = a_.x.data();
  float* xb = a_.xb.data();
  auto norm = [&](const Tensor& w, const Tensor& b) {
    if (anatomy.norm == NormKind::RMSNorm) cpu::rmsnorm(xb, x, w.f32(), B, C, c.norm_eps);
    else cpu::layernorm(xb, x, w.f32(), b.f32(), B, C, c.norm_eps);
  };
  // y [B, out] = in [B, width] · Wᵀ (+ bias), then each row's adapter adds s·B·A·in to its row.
  auto project = [&](float* y, const float* in, const Tensor& W, const Tensor& bias, LoraTarget t, int width, int out) {
    cpu::matmul(y, in, W.data, W.dtype, bias_of(bias), B, width, out);
    for (int b = 0; b < B; b++)
      if (!lora[size_t(b)].empty())
        lora_add(&lora[size_t(b)][size_t(layer)], t, y + size_t(b) * out, in + size_t(b) * width, 1, width, out, a_);
  };

  // --- attention ---
  norm(l.attn_norm, l.attn_norm_b);
  project(a_.q.data(), xb, l.wq, l.bq, LoraTarget::Q, C, Q);
  project(a_.k.data(), xb, l.wk, l.bk, LoraTarget::K, C, KV);
  project(a_.v.data(), xb, l.wv, l.bv, LoraTarget::V, C, KV);
  if (!l.q_norm.empty()) {
    cpu::rmsnorm(a_.q.data(), a_.q.data(), l.q_norm.f32(), B * c.n_heads, HS, c.norm_eps);
    cpu::rmsnorm(a_.k.data(), a_.k.data(), l.k_norm.f32(), B * c.n_kv_heads, HS, c.norm_eps);
  }
  std::vector<float> cs(static_cast<size_t>(HS));
  // Every row's key and value enter its slot's cache first, then all rows attend (in one pass): a
  // prompt row thus sees the rows of its slot before it.
  std::vector<cpu::AttentionRow> att(rows.size());
  for (int b = 0; b < B; b++) {
    const Row& r = rows[size_t(b)];
    float* qb = a_.q.data() + size_t(b) * Q;
    float* kb = a_.k.data() + size_t(b) * KV;
    if (anatomy.positions == Positions::Rope) {
      cpu::rope_angles(cs.data(), rope_freq_.data(), HS, r.pos);
      cpu::rope_rotate(qb, cs.data(), HS, 0, Q);
      cpu::rope_rotate(kb, cs.data(), HS, 0, KV);
    }
    KvCache& cache = caches_[size_t(r.slot)];
    cache.store_rows(layer, r.pos, kb, a_.v.data() + size_t(b) * KV, 1);
    att[size_t(b)] = {a_.att.data() + size_t(b) * Q, qb, cache.k(layer), cache.v(layer), r.pos};
  }
  // all rows in one pass (every slot's cache has the same layout)
  cpu::attention_rows(att.data(), B, c.n_heads, c.n_kv_heads, caches_[0].layout(), c.sliding_window);
  project(xb, a_.att.data(), l.wo, l.bo, LoraTarget::O, Q, C);
  cpu::add_inplace(x, xb, size_t(B) * C);

  // --- feed-forward: SwiGLU (w2·(silu(w1·xb) ⊙ w3·xb)) or GELU (w2·gelu(w1·xb)) ---
  norm(l.ffn_norm, l.ffn_norm_b);
  project(a_.hb.data(), xb, l.w1, l.b1, LoraTarget::W1, C, H);
  if (anatomy.gated_ffn) {
    project(a_.hb2.data(), xb, l.w3, Tensor{}, LoraTarget::W3, C, H);  // no bias on the up projection
    cpu::swiglu(a_.hb.data(), a_.hb.data(), a_.hb2.data(), size_t(B) * H);
  } else {
    cpu::gelu_tanh_inplace(a_.hb.data(), size_t(B) * H);
  }
  project(xb, a_.hb.data(), l.w2, l.b2, LoraTarget::W2, H, C);
  cpu::add_inplace(x, xb, size_t(B) * C);
}

}  // namespace orion
