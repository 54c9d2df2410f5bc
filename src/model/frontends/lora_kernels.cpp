// LoRA kernels: a frozen linear layer plus a low-rank adapter, y = W·x + b + (alpha/r)·B·(A·x),
// with A [r, in] and B [out, r] passed as graph INPUTS (surfaces), not constants: one compiled
// program serves every adapter, and switching adapters costs no compile (C9, C10).
#include "base/error.h"
#include "model/frontends/frontends.h"
#include "model/frontends/kernel_builder.h"

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
  Value x = b.act("x", in, S);                     // [1, in, 1, S]
  Value a = b.input("lora_a", {1, rank, 1, in});   // A [r, in] as an ANE surface
  Value bb = b.input("lora_b", {1, out, 1, rank});  // B [out, r]
  Value base = b.linear(x, "w", W, bias, "base");  // W·x + b             [1, out, 1, S]
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

}  // namespace orion::frontends
