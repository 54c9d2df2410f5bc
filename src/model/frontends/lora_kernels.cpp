// LoRA kernels: a frozen linear layer plus a low-rank adapter, y = W·x + b + (alpha/r)·B·(A·x),
// with A [r, in] and B [out, r] passed as graph INPUTS (surfaces), not constants: one compiled
// program serves every adapter, and switching adapters costs no compile (C9, C10).
#include <algorithm>
#include <utility>

#include "base/error.h"
#include "compiler/chip.h"
#include "model/frontends/frontends.h"
#include "model/frontends/kernel_builder.h"
#include "model/frontends/lora_frontends.h"

namespace orion::frontends {

namespace {
void check_rank(int rank, float alpha, const char* kernel) {
  if (rank < 1) throw_usage_error(fmt::format("{}: LoRA rank {} must be at least 1", kernel, rank), "rank");
  if (!(alpha > 0)) throw_usage_error(fmt::format("{}: LoRA alpha must be positive", kernel), "alpha");
}
}  // namespace

ir::Graph lora_linear(const Tensor& W, const Tensor& bias, int rank, float alpha, int S, KernelOptions opt) {
  check_rank(rank, alpha, "lora_linear");
  if (W.empty() || W.shape.size() != 2) throw_usage_error("lora_linear: the base weight must be a matrix", "weight");
  if (S < 1) throw_usage_error(fmt::format("lora_linear: sequence length {} must be at least 1", S), "seq");
  const int64_t out = W.shape[0], in = W.shape[1];
  KernelBuilder b("lora_linear", opt.dtype);
  Value x = b.act("x", in, S);                      // [1, in, 1, S]
  Value a = b.input("lora_a", {1, rank, 1, in});    // A [r, in] as an ANE surface
  Value bb = b.input("lora_b", {1, out, 1, rank});  // B [out, r]
  Value base = b.linear(x, "w", W, bias, "base");   // W·x + b             [1, out, 1, S]
  Value delta = b.lora_delta(x, a, bb, double(alpha) / rank, "delta");
  b.output(b.add(base, delta, "y"));
  return std::move(b.g);
}

ir::Graph lora_attention(const ModelWeights& w, int layer, int S, int rank, float alpha, KernelOptions opt) {
  check_kernel_args(w, layer, S, "lora_attention", nullptr);
  check_rank(rank, alpha, "lora_attention");
  const ModelConfig& c = w.config;
  const int64_t C = c.dim, Q = int64_t(c.n_heads) * c.head_dim(), KV = c.kv_dim();
  KernelBuilder b("lora_attention", opt.dtype);
  Value x = b.act("x", C, S);
  QVAdapters ad;
  ad.a_q = b.input("lora_a_q", {1, rank, 1, C}), ad.b_q = b.input("lora_b_q", {1, Q, 1, rank});
  ad.a_v = b.input("lora_a_v", {1, rank, 1, C}), ad.b_v = b.input("lora_b_v", {1, KV, 1, rank});
  ad.scale = double(alpha) / rank;
  AttentionParts p = attention_sublayer(b, w, layer, x, &ad);
  b.output(b.add(x, p.o, "y"));  // y = x + Wo·att (+ bo)
  b.output(p.k);
  b.output(p.v);
  return std::move(b.g);
}

// --- inference kernels with adapter slots (lora_frontends.h) ----------------------------------------

namespace {
// Rows of the declared input for a [rows, cols] adapter matrix: at least `rows`, and enough that
// the fp16 buffer reaches the minimum (C7).
int64_t padded_rows(int64_t rows, int64_t cols) {
  const int64_t min_elems = compiler::default_chip().min_buffer_bytes / 2;
  return std::max(rows, (min_elems + cols - 1) / cols);
}
Value adapter_input(KernelBuilder& b, const std::string& name, int64_t rows, int64_t cols) {
  const int64_t P = padded_rows(rows, cols);
  Value v = b.input(name, {1, P, 1, cols});
  if (P == rows) return v;
  return b.op(ir::Op::Slice, {v},
              {{"begin", std::vector<int64_t>{0, 0, 0, 0}}, {"end", std::vector<int64_t>{1, rows, 1, cols}}},
              name + "_rows");
}
// The adapter inputs of `adapters` stacked adapters of rank `slot` each: A [adapters·slot, C],
// B [out, adapters·slot] (adapter k in rank rows / columns k·slot ..).
QVAdapters qv_slots(KernelBuilder& b, const ModelConfig& c, int slot, int adapters = 1) {
  if (slot < 1) throw_usage_error(fmt::format("LoRA rank slot {} must be at least 1", slot), "rank");
  if (adapters < 1) throw_usage_error(fmt::format("{} adapter slots: at least 1 is needed", adapters), "adapters");
  const int64_t C = c.dim, Q = int64_t(c.n_heads) * c.head_dim(), KV = c.kv_dim(), R = int64_t(slot) * adapters;
  QVAdapters ad;
  ad.a_q = adapter_input(b, "lora_a_q", R, C), ad.b_q = adapter_input(b, "lora_b_q", Q, R);
  ad.a_v = adapter_input(b, "lora_a_v", R, C), ad.b_v = adapter_input(b, "lora_b_v", KV, R);
  ad.scale = 1.0;  // B arrives multiplied by its scale
  return ad;
}

// The decode projections with the adapters `ad`: q = Wq·xnorm (+ bq) + B_q·(A_q·xnorm), k plain, v
// like q; a mask (lora_delta) picks each column's adapter among stacked ones.
void lora_decode_qkv_outputs(KernelBuilder& b, const ModelWeights& w, int layer, Value x, const QVAdapters& ad, Value mask) {
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  Value xn = attention_norm(b, c, l, x);
  Value q_lora = b.lora_delta(xn, ad.a_q, ad.b_q, 1.0, "q_lora", mask);
  b.output(b.add(b.linear(xn, "wq", l.wq, l.bq, "q_base"), q_lora, "q"));
  b.output(b.linear(xn, "wk", l.wk, l.bk, "k"));
  Value v_lora = b.lora_delta(xn, ad.a_v, ad.b_v, 1.0, "v_lora", mask);
  b.output(b.add(b.linear(xn, "wv", l.wv, l.bv, "v_base"), v_lora, "v"));
}
}  // namespace

ir::Graph lora_prefill_attn(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt) {
  check_kernel_args(w, layer, S, "lora_prefill_attn", nullptr);
  KernelBuilder b("lora_prefill_attn", opt.dtype);
  Value x = b.act("x", w.config.dim, S);
  QVAdapters ad = qv_slots(b, w.config, rank_slot);
  AttentionParts p = attention_sublayer(b, w, layer, x, &ad);
  b.output(b.add(x, p.o, "y"));  // y = x + Wo·att (+ bo)
  b.output(p.k);
  b.output(p.v);
  return std::move(b.g);
}

ir::Graph lora_decode_qkv(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt) {
  check_kernel_args(w, layer, S, "lora_decode_qkv", nullptr);
  KernelBuilder b("lora_decode_qkv", opt.dtype);
  Value x = b.act("x", w.config.dim, S);
  QVAdapters ad = qv_slots(b, w.config, rank_slot);
  lora_decode_qkv_outputs(b, w, layer, x, ad, {});
  return std::move(b.g);
}

ir::Graph lora_decode_qkv_mixed(const ModelWeights& w, int layer, int S, int rank_slot, int adapter_slots,
                                KernelOptions opt) {
  check_kernel_args(w, layer, S, "lora_decode_qkv_mixed", nullptr);
  KernelBuilder b("lora_decode_qkv_mixed", opt.dtype);
  Value x = b.act("x", w.config.dim, S);
  QVAdapters ad = qv_slots(b, w.config, rank_slot, adapter_slots);
  Value mask = adapter_input(b, "lora_mask", int64_t(rank_slot) * adapter_slots, S);  // [1, R, 1, S]
  lora_decode_qkv_outputs(b, w, layer, x, ad, mask);
  return std::move(b.g);
}

// --- training kernels with adapter slots: the frozen base baked, A and B as inputs ---------------------

namespace {
// The families' training kernels differ only in name, family and qkv backward body: fwd_attn is the
// attention sublayer with the q, v adapter slots, outputs o, q, k, v, att, xnorm (<family>_fwd_attn's).
ir::Graph lora_fwd_attn(const char* kernel, const char* arch, const ModelWeights& w, int layer, int S, int rank_slot,
                        KernelOptions opt) {
  check_kernel_args(w, layer, S, kernel, arch);
  KernelBuilder b(kernel, opt.dtype);
  Value x = b.act("x", w.config.dim, S);  // [1, C, 1, S]
  QVAdapters ad = qv_slots(b, w.config, rank_slot);
  AttentionParts p = attention_sublayer(b, w, layer, x, &ad);
  for (Value v : {p.o, p.q, p.k, p.v, p.att, p.xnorm}) b.output(v);
  return std::move(b.g);
}
using QkvBackward = void (*)(KernelBuilder&, const ModelWeights&, int, int, const QVAdapters*);
ir::Graph lora_qkv_bwd(const char* kernel, const char* arch, QkvBackward body, const ModelWeights& w, int layer, int S,
                       int rank_slot, KernelOptions opt) {
  check_kernel_args(w, layer, S, kernel, arch);
  KernelBuilder b(kernel, opt.dtype);
  QVAdapters ad = qv_slots(b, w.config, rank_slot);
  body(b, w, layer, S, &ad);
  return std::move(b.g);
}
}  // namespace

ir::Graph llama_lora_fwd_attn(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt) {
  return lora_fwd_attn("llama_lora_fwd_attn", "llama", w, layer, S, rank_slot, opt);
}
ir::Graph llama_lora_qkv_bwd(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt) {
  return lora_qkv_bwd("llama_lora_qkv_bwd", "llama", llama_qkv_backward, w, layer, S, rank_slot, opt);
}
ir::Graph gpt2_lora_fwd_attn(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt) {
  return lora_fwd_attn("gpt2_lora_fwd_attn", "gpt2", w, layer, S, rank_slot, opt);
}
ir::Graph gpt2_lora_qkv_bwd(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt) {
  return lora_qkv_bwd("gpt2_lora_qkv_bwd", "gpt2", gpt2_qkv_backward, w, layer, S, rank_slot, opt);
}

std::map<std::string, ir::Tensor32> lora_qv_inputs(const ModelConfig& c, int slot, int r, float scale, const float* a_q,
                                                   const float* b_q, const float* a_v, const float* b_v) {
  ORION_CHECK(r <= slot, "adapter rank {} above the slot {}", r, slot);
  const int64_t C = c.dim, Q = int64_t(c.n_heads) * c.head_dim(), KV = c.kv_dim();
  std::map<std::string, ir::Tensor32> in;
  auto a_input = [&](const char* name, const float* A) {  // A [r, C] into rows 0..r of [1, P, 1, C]
    ir::Tensor32 t({1, padded_rows(slot, C), 1, C});
    if (A) std::copy(A, A + int64_t(r) * C, t.data.begin());
    in[name] = std::move(t);
  };
  auto b_input = [&](const char* name, const float* B, int64_t out) {  // s·B [out, r] into [1, P, 1, slot]
    ir::Tensor32 t({1, padded_rows(out, slot), 1, slot});
    if (B)
      for (int64_t o = 0; o < out; o++)
        for (int k = 0; k < r; k++) t.data[size_t(o * slot + k)] = scale * B[o * r + k];
    in[name] = std::move(t);
  };
  a_input("lora_a_q", a_q), b_input("lora_b_q", b_q, Q);
  a_input("lora_a_v", a_v), b_input("lora_b_v", b_v, KV);
  return in;
}

std::map<std::string, ir::Tensor32> lora_mixed_inputs(
    const ModelConfig& c, int slot, int adapter_slots,
    const std::vector<const std::map<std::string, ir::Tensor32>*>& adapters, const std::vector<int>& column_adapter, int S) {
  ORION_CHECK(int(adapters.size()) <= adapter_slots, "{} adapters in a program of {} adapter slots", adapters.size(),
              adapter_slots);
  ORION_CHECK(int(column_adapter.size()) <= S, "{} columns in a bucket of {}", column_adapter.size(), S);
  const int64_t C = c.dim, Q = int64_t(c.n_heads) * c.head_dim(), KV = c.kv_dim(), R = int64_t(slot) * adapter_slots;
  std::map<std::string, ir::Tensor32> in;
  for (const char* name : {"lora_a_q", "lora_a_v"}) {  // adapter k's A [slot, C] into rank rows k·slot ..
    ir::Tensor32 t({1, padded_rows(R, C), 1, C});
    for (size_t k = 0; k < adapters.size(); k++) {
      const std::vector<float>& a = adapters[k]->at(name).data;
      std::copy(a.begin(), a.begin() + slot * C, t.data.begin() + std::ptrdiff_t(int64_t(k) * slot * C));
    }
    in[name] = std::move(t);
  }
  for (auto [name, out] : {std::pair{"lora_b_q", Q}, std::pair{"lora_b_v", KV}}) {  // s·B [out, slot] into columns k·slot ..
    ir::Tensor32 t({1, padded_rows(out, R), 1, R});
    for (size_t k = 0; k < adapters.size(); k++) {
      const std::vector<float>& bk = adapters[k]->at(name).data;
      for (int64_t o = 0; o < out; o++)
        std::copy(bk.begin() + o * slot, bk.begin() + (o + 1) * slot,
                  t.data.begin() + std::ptrdiff_t(o * R + int64_t(k) * slot));
    }
    in[name] = std::move(t);
  }
  ir::Tensor32 mask({1, padded_rows(R, S), 1, S});  // column j keeps the rank rows of its adapter
  for (size_t j = 0; j < column_adapter.size(); j++)
    if (const int k = column_adapter[j]; k >= 0) {
      ORION_CHECK(k < int(adapters.size()), "column {} names adapter {} of {}", j, k, adapters.size());
      for (int64_t i = int64_t(k) * slot; i < int64_t(k + 1) * slot; i++) mask.data[size_t(i * S) + j] = 1.0f;
    }
  in["lora_mask"] = std::move(mask);
  return in;
}

}  // namespace orion::frontends
