#include "model/transformer.h"

#include <algorithm>

#include "base/error.h"
#include "model/family/family.h"
#include "model/lora/lora.h"
#include "runtime/cpu/kernels.h"

namespace orion {

Transformer::Transformer(const ModelWeights& weights, int max_seq, DType kv_cache)
    : w_(weights),
      max_seq_(max_seq > 0 ? std::min(max_seq, weights.config.seq_len) : weights.config.seq_len),
      kv_dim_(weights.config.kv_dim()) {
  const ModelConfig& c = w_.config;
  size_t n = kChunk, C = c.dim, Q = size_t(c.n_heads) * c.head_dim(), H = c.hidden_dim;
  a_.x.resize(n * C), a_.xb.resize(n * C), a_.q.resize(n * Q), a_.att.resize(n * Q);
  a_.k.resize(n * kv_dim_), a_.v.resize(n * kv_dim_);
  a_.hb.resize(n * H), a_.hb2.resize(n * H);
  cache_ = KvCache(c, max_seq_, kv_cache);
}

const float* Transformer::forward(const int* tokens, int n, int pos, bool all_logits) {
  const ModelConfig& c = w_.config;
  if (n <= 0) throw_usage_error("no tokens to run", "prompt", "give a non-empty prompt");
  if (pos < 0 || pos + n > max_seq_)
    throw_usage_error(fmt::format("sequence of {} tokens exceeds the model's context of {}", pos + n, max_seq_), "n",
                      "ask for fewer tokens or use a shorter prompt");
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      throw_usage_error(fmt::format("token id {} is outside the model's vocabulary of {}", tokens[i], c.vocab_size),
                        "tokens", "the tokenizer does not belong to this model");
  size_t V = size_t(c.vocab_size);
  logits_.resize(all_logits ? size_t(n) * V : V);
  for (int done = 0; done < n; done += kChunk) {
    int m = std::min(kChunk, n - done);
    bool want = all_logits || done + m == n;  // only the chunk holding the last token needs logits
    forward_chunk(tokens + done, m, pos + done, want ? logits_.data() + (all_logits ? size_t(done) * V : 0) : nullptr,
                  all_logits);
  }
  return logits_.data();
}

// One chunk of n ≤ kChunk tokens through embedding → L blocks → final norm → classifier.
void Transformer::forward_chunk(const int* tokens, int n, int pos, float* logits_out, bool all_logits) {
  const ModelConfig& c = w_.config;
  const int C = c.dim;
  const ModelFamily& family = model_family(c.arch);
  const Anatomy anatomy = family.anatomy();
  // x[t] = tok_emb[token t] (+ pos_emb[pos + t] with learned positions)
  for (int t = 0; t < n; t++) {
    float* xt = a_.x.data() + size_t(t) * C;
    cpu::embedding_row(xt, w_.tok_emb.data, w_.tok_emb.dtype, tokens[t], C);
    if (anatomy.positions == Positions::Learned) {
      std::vector<float> p(static_cast<size_t>(C));
      cpu::embedding_row(p.data(), w_.pos_emb.data, w_.pos_emb.dtype, pos + t, C);
      cpu::add_inplace(xt, p.data(), size_t(C));
    }
  }
  // decode: the whole token in one go when the family has a fast path for it
  if (n == 1 && logits_out && !lora_ &&
      family.decode_token(w_, a_, pos, cache_, logits_out))
    return;
  for (int l = 0; l < c.n_layers; l++)
    family.block_forward(c, w_.layers[size_t(l)], a_, n, pos, cache_, l, lora_ ? &lora_layers_[size_t(l)] : nullptr);
  if (!logits_out) return;
  // Final norm and classifier: on every token, or only on the last one.
  int first = all_logits ? 0 : n - 1, rows = n - first;
  const float* x = a_.x.data() + size_t(first) * C;
  if (anatomy.norm == NormKind::RMSNorm) cpu::rmsnorm(a_.xb.data(), x, w_.final_norm.f32(), rows, C, c.norm_eps);
  else cpu::layernorm(a_.xb.data(), x, w_.final_norm.f32(), w_.final_norm_b.f32(), rows, C, c.norm_eps);
  // logits[t] = xb[t] · classifierᵀ over the real vocabulary (llm.c's padding rows are skipped)
  cpu::matmul(logits_out, a_.xb.data(), w_.classifier.data, w_.classifier.dtype, nullptr, rows, C, c.vocab_size);
}

void Transformer::set_lora(const LoraAdapter* adapter, float scale_mult) {
  lora_ = adapter;
  lora_layers_.clear();
  if (!adapter) return;
  lora_layers_ = lora_layer_refs(w_.config, *adapter, scale_mult);
  size_t max_out = 0;
  for (const LoraTensor& t : adapter->tensors()) max_out = std::max(max_out, size_t(t.out));
  a_.lora_ax.resize(size_t(kChunk) * adapter->rank());
  a_.lora_delta.resize(size_t(kChunk) * max_out);
}

std::vector<LoraLayerRef> lora_layer_refs(const ModelConfig& c, const LoraAdapter& adapter, float scale_mult) {
  adapter.check_fits(c, "adapter");
  std::vector<LoraLayerRef> refs(size_t(c.n_layers));
  for (const LoraTensor& t : adapter.tensors()) {
    LoraLayerRef& r = refs[size_t(t.layer)];
    r.A[int(t.target)] = adapter.A(t), r.B[int(t.target)] = adapter.B(t);
    r.rank = adapter.rank(), r.scale = adapter.scale() * scale_mult;
  }
  return refs;
}

void lora_add(const LoraLayerRef* lora, LoraTarget target, float* y, const float* x, int n, int in, int out,
              Transformer::Activations& a) {
  const int t = int(target);
  if (!lora || !lora->A[t]) return;
  const int r = lora->rank;
  cpu::matmul(a.lora_ax.data(), x, lora->A[t], DType::F32, nullptr, n, in, r);                     // ax = x·Aᵀ    [n, r]
  cpu::matmul(a.lora_delta.data(), a.lora_ax.data(), lora->B[t], DType::F32, nullptr, n, r, out);  // ax·Bᵀ [n, out]
  const float s = lora->scale;
  const float* d = a.lora_delta.data();
  for (size_t i = 0; i < size_t(n) * out; i++) y[i] += s * d[i];
}

std::vector<cpu::ByteRange> Transformer::decode_reads(int pos) const {
  const ModelConfig& c = w_.config;
  std::vector<cpu::ByteRange> reads;
  auto matrix = [&](const Tensor& t) {
    if (!t.empty()) reads.push_back({t.data, t.nbytes()});
  };
  for (int l = 0; l < c.n_layers; l++) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    matrix(lw.wq), matrix(lw.wk), matrix(lw.wv);
    cache_.add_decode_reads(l, pos, reads);
    matrix(lw.wo), matrix(lw.w1), matrix(lw.w3), matrix(lw.w2);
  }
  reads.push_back({w_.classifier.data, dtype_bytes(w_.classifier.dtype, size_t(c.vocab_size) * size_t(c.dim))});
  return reads;
}

double Transformer::decode_bytes(int pos) const { return cpu::total_bytes(decode_reads(pos)); }

}  // namespace orion
