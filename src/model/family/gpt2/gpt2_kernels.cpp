// GPT-2 inference kernels (pre-norm blocks, as gpt2_block.cpp):
//
//   prefill_attn   x → y = x + Wo·attn(ln1(x)) + bo, and k, v for the cache
//   prefill_ffn    x → y = x + W2·gelu(W1·ln2(x) + b1) + b2
//   decode_qkv     x → q, k, v of the new token (column 0); the CPU attends over its cache
//   decode_ffn     x, att → h = x + Wo·att + bo;  y = h + ffn(h)
//
// Every activation is [1, C, 1, S]; the letters are those of frontends.h.
#include "base/error.h"
#include "model/frontends/frontends.h"
#include "model/frontends/kernel_builder.h"

namespace orion::frontends {

namespace {

// The feed-forward half of a GPT-2 block: y = x + W2·gelu(W1·ln2(x) + b1) + b2.
Value gpt2_ffn(KernelBuilder& b, const ModelWeights& w, int layer, Value x) {
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  Value xn = b.layernorm(x, "ln2", l.ffn_norm, l.ffn_norm_b, c.norm_eps, "xnorm2");  // [1, C, 1, S]
  Value h = b.linear(xn, "w1", l.w1, l.b1, "fc");                                    // [1, H, 1, S]
  Value a = b.op(ir::Op::Gelu, {h}, {}, "fc_gelu");                                  // tanh form (C2)
  Value f = b.linear(a, "w2", l.w2, l.b2, "proj");                                   // [1, C, 1, S]
  return b.add(x, f, "y");
}

}  // namespace

ir::Graph gpt2_prefill_attn(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "gpt2_prefill_attn", "gpt2");
  KernelBuilder b("gpt2_prefill_attn", opt.dtype);
  Value x = b.act("x", w.config.dim, S);  // residual stream of tokens 0..S−1   [1, C, 1, S]
  AttentionParts p = attention_sublayer(b, w, layer, x);
  b.output(b.add(x, p.o, "y"));  // y = x + Wo·att + bo
  b.output(p.k);                 // k = Wk·ln1(x) + bk                        [1, C, 1, S]
  b.output(p.v);                 // v = Wv·ln1(x) + bv
  return std::move(b.g);
}

ir::Graph gpt2_prefill_ffn(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "gpt2_prefill_ffn", "gpt2");
  KernelBuilder b("gpt2_prefill_ffn", opt.dtype);
  Value x = b.act("x", w.config.dim, S);
  b.output(gpt2_ffn(b, w, layer, x));
  return std::move(b.g);
}

ir::Graph gpt2_decode_qkv(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "gpt2_decode_qkv", "gpt2");
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  KernelBuilder b("gpt2_decode_qkv", opt.dtype);
  // The token is column 0 of a bucket of S ≥ 16 columns (C7); the columns are independent here.
  Value x = b.act("x", c.dim, S);
  Value xn = b.layernorm(x, "ln1", l.attn_norm, l.attn_norm_b, c.norm_eps, "xnorm");
  b.output(b.linear(xn, "wq", l.wq, l.bq, "q"));  // [1, C, 1, S] each
  b.output(b.linear(xn, "wk", l.wk, l.bk, "k"));
  b.output(b.linear(xn, "wv", l.wv, l.bv, "v"));
  return std::move(b.g);
}

ir::Graph gpt2_decode_ffn(const ModelWeights& w, int layer, int S, KernelOptions opt) {
  check_kernel_args(w, layer, S, "gpt2_decode_ffn", "gpt2");
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  KernelBuilder b("gpt2_decode_ffn", opt.dtype);
  Value x = b.act("x", c.dim, S);                                 // residual stream before this block's attention
  Value att = b.act("att", c.dim, S);                             // softmax(q·Kᵀ/√HS)·V from the CPU, before Wo
  Value h = b.add(x, b.linear(att, "wo", l.wo, l.bo, "o"), "h");  // h = x + Wo·att + bo
  b.output(gpt2_ffn(b, w, layer, h));
  return std::move(b.g);
}

}  // namespace orion::frontends
