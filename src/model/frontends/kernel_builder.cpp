// The building blocks of the frontends (see kernel_builder.h); shapes in comments use the letters
// of frontends.h.
#include "model/frontends/kernel_builder.h"

#include <cmath>

#include "base/error.h"
#include "model/family/family.h"
#include "model/family/llama/llama.h"

namespace orion::frontends {

using ir::Op;

// --- values ------------------------------------------------------------------------------------

Value KernelBuilder::scalar(double v, const std::string& name) {
  auto it = scalars_.find(v);
  if (it != scalars_.end()) return it->second;
  return scalars_[v] = g.scalar(g.fresh_name(name), v, dt);
}

namespace {
std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  convert_dtype(t.data, t.dtype, v.data(), DType::F32, v.size());
  return v;
}
}  // namespace

Value KernelBuilder::weight(const std::string& name, const Tensor& W, bool transposed) {
  ORION_CHECK(!W.empty() && W.shape.size() == 2, "weight {} must be a matrix", name);
  ORION_CHECK(dt == ir::ElemType::F16 || dt == ir::ElemType::F32, "weights are fp16 or fp32");
  const int64_t out = W.shape[0], in = W.shape[1];
  if (transposed) {  // Wᵀ [in, out], through fp32
    std::vector<float> v = to_f32(W), t(v.size());
    for (int64_t o = 0; o < out; o++)
      for (int64_t i = 0; i < in; i++) t[size_t(i * out + o)] = v[size_t(o * in + i)];
    return constant(name, {in, out, 1, 1}, t);
  }
  // [out, in] → [out, in, 1, 1] is the same bytes: one conversion straight into the constant
  // (a copy when the model is already stored in the kernel's type).
  ir::Type type{dt, {out, in, 1, 1}};
  auto data = std::make_shared<ir::ConstData>();
  data->bytes.resize(type.bytes());
  convert_dtype(W.data, W.dtype, data->bytes.data(), dt == ir::ElemType::F16 ? DType::F16 : DType::F32, size_t(W.numel()));
  return g.constant(name, std::move(type), std::move(data));
}

Value KernelBuilder::channel_vector(const std::string& name, const Tensor& v) {
  ORION_CHECK(!v.empty() && v.shape.size() == 1, "{} must be a vector", name);
  return constant(name, {1, v.shape[0], 1, 1}, to_f32(v));
}

std::vector<Value> KernelBuilder::channel_vectors(const std::string& name, const std::vector<const Tensor*>& vs) {
  std::vector<float> all;
  std::vector<int64_t> sizes;
  for (const Tensor* v : vs) {
    ORION_CHECK(!v->empty() && v->shape.size() == 1, "{} must hold vectors", name);
    const std::vector<float> f = to_f32(*v);
    all.insert(all.end(), f.begin(), f.end());
    sizes.push_back(v->shape[0]);
  }
  Value packed = constant(name, {1, int64_t(all.size()), 1, 1}, all);
  return g.results_of(op(Op::Split, {packed}, {{"axis", int64_t(1)}, {"split_sizes", sizes}}, name + "_split"));
}

Value KernelBuilder::matmul(Value x, Value y, bool tx, bool ty, const std::string& name) {
  return op(Op::Matmul, {x, y}, {{"transpose_x", tx}, {"transpose_y", ty}}, name);
}

// --- layers ------------------------------------------------------------------------------------

Value KernelBuilder::linear(Value x, const std::string& wname, const Tensor& W, const Tensor& b, const std::string& name) {
  // x [1, in, 1, S] → y [1, out, 1, S]: y[o, s] = Σ_i W[o, i]·x[i, s]
  if (b.empty()) return op(Op::Conv1x1, {x, weight(wname, W)}, {}, name);
  Value y = op(Op::Conv1x1, {x, weight(wname, W)}, {}, name + "_conv");
  return add(y, channel_vector("b" + wname.substr(1), b), name);  // bias of "wq" is "bq"
}

Value KernelBuilder::linear_t(Value dy, const std::string& wname, const Tensor& W, const std::string& name) {
  // dy [1, out, 1, S] → dx [1, in, 1, S]: dx[i, s] = Σ_o W[o, i]·dy[o, s]
  return op(Op::Conv1x1, {dy, weight(wname, W, /*transposed=*/true)}, {}, name);
}

Value KernelBuilder::layernorm(Value x, const std::string& prefix, const Tensor& w, const Tensor& b, float eps,
                               const std::string& name) {
  // mean, var over the channels (axis 1), one value per position: [1, 1, 1, S]
  Value mean = reduce(Op::ReduceMean, x, {1}, prefix + "_mean");
  Value d = sub(x, mean, prefix + "_centred");                          // x − mean       [1, C, 1, S]
  Value var = reduce(Op::ReduceMean, mul(d, d), {1}, prefix + "_var");  // mean((x − mean)²)
  Value r = op(Op::Pow, {add(var, scalar(eps, "eps")), scalar(-0.5, "neg_half")}, {}, prefix + "_rstd");
  Value gamma = channel_vector(prefix + "_w", w);
  Value y = mul(mul(d, r), gamma);
  return add(y, channel_vector(prefix + "_b", b), name);
}

Value KernelBuilder::rmsnorm(Value x, const std::string& prefix, const Tensor& w, float eps, const std::string& name) {
  Value ms = reduce(Op::ReduceMean, mul(x, x), {1}, prefix + "_ms");  // mean(x²)   [1, 1, 1, S]
  Value r = op(Op::Pow, {add(ms, scalar(eps, "eps")), scalar(-0.5, "neg_half")}, {}, prefix + "_rrms");
  Value gamma = channel_vector(prefix + "_w", w);
  return mul(mul(x, r), gamma, name);
}

Value KernelBuilder::rmsnorm_backward(Value x, Value dy, const std::string& prefix, const Tensor& w, float eps,
                                      const std::string& name) {
  // y_i = x_i·r·w_i with r = (Σ_j x_j²/C + eps)^−½, so ∂r/∂x_i = −r³·x_i/C and
  // dx_i = g_i·r − x_i·r³·(Σ_j g_j x_j)/C with g = dy⊙w; written with x̂ = x·r as
  // dx = r·(g − x̂·mean(g⊙x̂)). The r³ form overflows fp16 when the activations are small — at the
  // usual init (embeddings ~N(0, 0.02²)) mean(x²) ≈ 4e-4 gives r³ ≈ 1.2e5 > 65504 — x̂ stays ~1.
  Value ms = reduce(Op::ReduceMean, mul(x, x), {1}, prefix + "_ms");
  Value r = op(Op::Pow, {add(ms, scalar(eps, "eps")), scalar(-0.5, "neg_half")}, {}, prefix + "_rrms");
  Value xhat = mul(x, r, prefix + "_xhat");                               // x̂ = x·r        [1, C, 1, S]
  Value gw = mul(dy, channel_vector(prefix + "_w", w), prefix + "_g");    // g = dy⊙w       [1, C, 1, S]
  Value gx = reduce(Op::ReduceMean, mul(gw, xhat), {1}, prefix + "_gx");  // mean(g⊙x̂)     [1, 1, 1, S]
  return mul(sub(gw, mul(xhat, gx)), r, name);
}

Value KernelBuilder::layernorm_backward(Value x, Value dy, const std::string& prefix, const Tensor& w, float eps,
                                        const std::string& name) {
  // y = x̂⊙w + b with x̂ = (x − μ)·r: the mean and the variance both depend on every x_j, which
  // gives the two correction terms (the gradient is orthogonal to 1 and to x̂).
  Value mean = reduce(Op::ReduceMean, x, {1}, prefix + "_mean");
  Value d = sub(x, mean, prefix + "_centred");  // x − μ          [1, C, 1, S]
  Value var = reduce(Op::ReduceMean, mul(d, d), {1}, prefix + "_var");
  Value r = op(Op::Pow, {add(var, scalar(eps, "eps")), scalar(-0.5, "neg_half")}, {}, prefix + "_rstd");
  Value xhat = mul(d, r, prefix + "_xhat");                               // x̂             [1, C, 1, S]
  Value gw = mul(dy, channel_vector(prefix + "_w", w), prefix + "_g");    // g = dy⊙w
  Value gmean = reduce(Op::ReduceMean, gw, {1}, prefix + "_gmean");       // mean(g)        [1, 1, 1, S]
  Value gx = reduce(Op::ReduceMean, mul(gw, xhat), {1}, prefix + "_gx");  // mean(g⊙x̂)     [1, 1, 1, S]
  Value xhat_gx = mul(xhat, gx);
  return mul(sub(sub(gw, gmean), xhat_gx), r, name);
}

Value KernelBuilder::gelu_backward(Value h, Value dy, const std::string& name) {
  // gelu(h) = ½h(1 + tanh u), u = s(h + a·h³), s = √(2/π), a = 0.044715:
  //   gelu'(h) = ½(1 + tanh u) + ½h·(1 − tanh² u)·s(1 + 3a·h²)
  const double s = 0.7978845608028654, a = 0.044715;
  Value h2 = mul(h, h);
  Value cs = scalar(s, "gelu_s"), ca = scalar(a, "gelu_a");
  Value h3 = mul(h2, h);
  Value u = mul(add(h, mul(h3, ca)), cs);
  Value t = op(Op::Tanh, {u}, {}, name + "_tanh");
  Value half = scalar(0.5, "half"), one = scalar(1.0, "one");
  Value left = mul(half, add(one, t));
  Value sech2 = sub(one, mul(t, t));
  Value c3a = scalar(3 * a, "gelu_3a");
  Value inner = mul(cs, add(one, mul(h2, c3a)));
  Value right = mul(mul(mul(half, h), sech2), inner);
  return mul(dy, add(left, right), name);
}

// --- attention pieces --------------------------------------------------------------------------

Value KernelBuilder::repeat_kv(Value kv4, int64_t G) {
  if (G == 1) return kv4;
  auto s = shape(kv4);  // [1, NKV, HS, S]
  Value flat = reshape(kv4, {1, s[1], 1, s[2] * s[3]});
  auto it = tables_.find("ones_groups");
  Value ones = it != tables_.end()
                   ? it->second
                   : tables_["ones_groups"] = constant("kv_group_ones", {1, 1, G, 1}, std::vector<float>(size_t(G), 1.0f));
  return reshape(mul(flat, ones), {1, s[1] * G, s[2], s[3]});  // [1, NKV, G, HS·S] → [1, NH, HS, S]
}

Value KernelBuilder::sum_kv_groups(Value x4, int64_t G) {
  auto s = shape(x4);  // [1, NH, HS, S]
  if (G == 1) return x4;
  Value grouped = reshape(x4, {1, s[1] / G, G, s[2] * s[3]});
  return reshape(reduce(Op::ReduceSum, grouped, {2}), {1, s[1] / G, s[2], s[3]});
}

Value KernelBuilder::causal_mask(int64_t S, int window) {
  auto it = tables_.find("mask");
  if (it != tables_.end()) return it->second;
  std::vector<float> m(size_t(S * S), 0.0f);
  for (int64_t i = 0; i < S; i++)
    for (int64_t j = 0; j < S; j++)  // query i sees key j when j ≤ i (and i − j < window with a window)
      if (j > i || (window > 0 && i - j >= window)) m[size_t(i * S + j)] = -1e4f;
  return tables_["mask"] = constant(window > 0 ? "sliding_window_mask" : "causal_mask", {1, 1, S, S}, m);
}

Value KernelBuilder::attention_probs(Value q4, Value k4, double scale, const std::string& name, int window) {
  // scores[h, i, j] = Σ_d q[h, d, i]·k[h, d, j]: qᵀ·k per head                [1, NH, S, S]
  Value scores = matmul(q4, k4, /*tx=*/true, /*ty=*/false, "scores");
  Value mask = causal_mask(shape(q4)[3], window);
  Value masked = add(mul(scores, scalar(scale, "attn_scale")), mask, "scores_masked");
  return op(Op::Softmax, {masked}, {{"axis", int64_t(-1)}}, name);  // over the keys j
}

Value KernelBuilder::rope(Value x, int64_t N, int64_t HS, const std::vector<float>& inv_freq, bool inverse,
                         const std::string& name) {
  const int64_t S = shape(x)[3], P = N * HS / 2;  // P channel pairs
  ORION_CHECK(int64_t(inv_freq.size()) == HS / 2, "RoPE needs {} frequencies, got {}", HS / 2, inv_freq.size());
  // Tables [1, 1, HS/2, S], shared by every head (and by q and k): the angle of pair i at
  // position s is s·inv_freq[i], computed in fp32 exactly as the CPU's cpu::rope_angles.
  if (!tables_.count("rope_cos")) {
    std::vector<float> c(size_t(HS / 2 * S)), sn(c.size()), nsn(c.size());
    for (int64_t i = 0; i < HS / 2; i++) {
      const float freq = inv_freq[size_t(i)];
      for (int64_t s = 0; s < S; s++) {
        const float a = float(s) * freq;
        c[size_t(i * S + s)] = std::cos(a), sn[size_t(i * S + s)] = std::sin(a), nsn[size_t(i * S + s)] = -std::sin(a);
      }
    }
    tables_["rope_cos"] = constant("rope_cos", {1, 1, HS / 2, S}, c);
    tables_["rope_sin"] = constant("rope_sin", {1, 1, HS / 2, S}, sn);
    tables_["rope_nsin"] = constant("rope_neg_sin", {1, 1, HS / 2, S}, nsn);
    tables_["sel_even"] = constant("rope_sel_even", {1, 1, 2, 1}, {1.0f, 0.0f});
    tables_["sel_odd"] = constant("rope_sel_odd", {1, 1, 2, 1}, {0.0f, 1.0f});
  }
  Value cos = tables_["rope_cos"], sin = tables_[inverse ? "rope_nsin" : "rope_sin"];
  // Channel h·HS + 2i + j is element (pair h·HS/2 + i, j): split the pairs into even and odd parts.
  Value pairs = reshape(x, {1, P, 2, S});
  auto eo = g.results_of(op(Op::Split, {pairs}, {{"axis", int64_t(2)}, {"split_sizes", std::vector<int64_t>{1, 1}}}));
  Value e = reshape(eo[0], {1, N, HS / 2, S}), o = reshape(eo[1], {1, N, HS / 2, S});
  Value o_sin = mul(o, sin), e_cos = mul(e, cos);
  Value e2 = sub(e_cos, o_sin);  // x'[2i]   = x[2i]·cos − x[2i+1]·sin
  Value o_cos = mul(o, cos), e_sin = mul(e, sin);
  Value o2 = add(e_sin, o_cos);  // x'[2i+1] = x[2i]·sin + x[2i+1]·cos
  // Interleave again without concat (C1): e2⊗[1, 0] + o2⊗[0, 1] is [1, P, 2, S].
  Value even = mul(reshape(e2, {1, P, 1, S}), tables_["sel_even"]);
  Value odd = mul(reshape(o2, {1, P, 1, S}), tables_["sel_odd"]);
  return reshape(add(even, odd), {1, N * HS, 1, S}, name);
}

Value KernelBuilder::head_rmsnorm(Value x, int64_t N, int64_t HS, const std::string& prefix, const Tensor& w,
                                 float eps, const std::string& name) {
  const int64_t S = shape(x)[3];
  Value x4 = reshape(x, {1, N, HS, S});                                    // heads    [1, N, HS, S]
  Value ms = reduce(Op::ReduceMean, mul(x4, x4), {2}, prefix + "_ms");     // mean(x²) [1, N, 1, S]
  Value r = op(Op::Pow, {add(ms, scalar(eps, "eps")), scalar(-0.5, "neg_half")}, {}, prefix + "_rrms");
  ORION_CHECK(!w.empty() && w.numel() == HS, "{} must have {} values", prefix, HS);
  Value gamma = constant(prefix + "_w", {1, 1, HS, 1}, to_f32(w));         // one row per channel of a head
  Value y = mul(mul(x4, r), gamma);
  return reshape(y, {1, N * HS, 1, S}, name);
}

Value KernelBuilder::lora_delta(Value x, Value a, Value b, double scale, const std::string& name, Value mask) {
  const int64_t in = shape(x)[1], S = shape(x)[3], r = shape(a)[1], out = shape(b)[1];
  Value x3 = reshape(x, {1, 1, in, S}), a3 = reshape(a, {1, 1, r, in});
  Value ax = matmul(a3, x3, false, false);                           // A·x   [1, 1, r, S]
  if (mask.valid()) ax = mul(ax, reshape(mask, {1, 1, r, S}));
  Value bax = matmul(reshape(b, {1, 1, out, r}), ax, false, false);  // B·A·x [1, 1, out, S]
  Value s = scalar(scale, "lora_scale");
  return mul(reshape(bax, {1, out, 1, S}), s, name);
}

Value KernelBuilder::lora_delta_backward(Value dy, Value a, Value b, double scale, const std::string& name) {
  const int64_t out = shape(dy)[1], S = shape(dy)[3], r = shape(a)[1], in = shape(a)[3];
  // (Bᵀ·dy)[k, s] = Σ_o B[o, k]·dy[o, s]                                            [1, 1, r, S]
  Value b3 = reshape(b, {1, 1, out, r}), dy3 = reshape(dy, {1, 1, out, S});
  Value bty = matmul(b3, dy3, /*tx=*/true, false);
  // (Aᵀ·u)[i, s] = Σ_k A[k, i]·u[k, s]                                              [1, 1, in, S]
  Value atu = matmul(reshape(a, {1, 1, r, in}), bty, /*tx=*/true, false);
  Value s = scalar(scale, "lora_scale");
  return mul(reshape(atu, {1, in, 1, S}), s, name);
}

// --- the attention sublayer --------------------------------------------------------------------

Value attention_norm(KernelBuilder& b, const ModelConfig& c, const LayerWeights& l, Value x) {
  return model_family(c.arch).anatomy().norm == NormKind::LayerNorm
             ? b.layernorm(x, "ln1", l.attn_norm, l.attn_norm_b, c.norm_eps, "xnorm")
             : b.rmsnorm(x, "attn_norm", l.attn_norm, c.norm_eps, "xnorm");
}

QkvParts qkv_projections(KernelBuilder& b, const ModelWeights& w, int layer, Value x, const QVAdapters* lora, bool rope) {
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  const int64_t NH = c.n_heads, NKV = c.n_kv_heads, HS = c.head_dim();
  const std::vector<float> inv_freq = rope ? llama_rope_frequencies(c) : std::vector<float>{};
  QkvParts p;
  // xnorm = norm1(x)                                                              [1, C, 1, S]
  p.xnorm = attention_norm(b, c, l, x);
  // q = Wq·xnorm (+ bq) [1, Q, 1, S]; k = Wk·xnorm, v = Wv·xnorm (+ bk, bv) [1, KV, 1, S];
  // an adapter adds scale·B·A·xnorm. Qwen3 normalises each head of q and k (q_norm, k_norm), then
  // RoPE families rotate q and k; the final values are named q, k, v.
  // Qwen2's q/k/v biases share one constant (bqkv, split in three): with them, 16 constants would
  // be one more than a program may hold (C16). GPT-2's biases stay separate constants.
  std::vector<Value> qkv_bias;
  if (model_family(c.arch).anatomy().qkv_bias) qkv_bias = b.channel_vectors("bqkv", {&l.bq, &l.bk, &l.bv});
  auto packed_bias = [&](size_t i) { return qkv_bias.empty() ? Value{} : qkv_bias[i]; };
  auto project = [&](const char* n, const Tensor& W, const Tensor& bias, Value packed, Value a, Value bb, bool rope,
                     int64_t heads, const Tensor& head_norm) {
    // The last node is named q, k or v: the projection is q_lin when RoPE or a head norm follows.
    const bool more = rope || !head_norm.empty();
    std::string out = n, lin = more ? out + "_lin" : out, y_name = a.valid() ? lin + "_base" : lin;
    const std::string wname = std::string("w") + n;
    Value y = packed.valid() ? b.add(b.linear(p.xnorm, wname, W, {}, y_name + "_conv"), packed, y_name)
                             : b.linear(p.xnorm, wname, W, bias, y_name);
    if (a.valid()) y = b.add(y, b.lora_delta(p.xnorm, a, bb, lora->scale, out + "_lora"), lin);
    const std::string normed = rope ? out + "_normed" : out;
    if (!head_norm.empty()) y = b.head_rmsnorm(y, heads, HS, out + "_norm", head_norm, c.norm_eps, normed);
    return rope ? b.rope(y, heads, HS, inv_freq, false, out) : y;
  };
  Value none;
  const Tensor no_norm;
  p.q = project("q", l.wq, l.bq, packed_bias(0), lora ? lora->a_q : none, lora ? lora->b_q : none, rope, NH, l.q_norm);
  p.k = project("k", l.wk, l.bk, packed_bias(1), none, none, rope, NKV, l.k_norm);
  p.v = project("v", l.wv, l.bv, packed_bias(2), lora ? lora->a_v : none, lora ? lora->b_v : none, false, NKV, no_norm);
  return p;
}

AttentionParts attention_sublayer(KernelBuilder& b, const ModelWeights& w, int layer, Value x, const QVAdapters* lora) {
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[size_t(layer)];
  const int64_t NH = c.n_heads, NKV = c.n_kv_heads, HS = c.head_dim(), G = NH / NKV;
  const QkvParts qkv = qkv_projections(b, w, layer, x, lora, model_family(c.arch).anatomy().positions == Positions::Rope);
  AttentionParts p;
  p.xnorm = qkv.xnorm, p.q = qkv.q, p.k = qkv.k, p.v = qkv.v;
  // probs = softmax(qᵀk/√HS + mask) [1, NH, S, S];  att[h, d, i] = Σ_j v[h, d, j]·probs[h, i, j]
  Value k4 = b.repeat_kv(b.heads(p.k, NKV, HS), G), v4 = b.repeat_kv(b.heads(p.v, NKV, HS), G);
  Value probs = b.attention_probs(b.heads(p.q, NH, HS), k4, 1.0 / std::sqrt(double(HS)), "probs", c.sliding_window);
  p.att = b.merge_heads(b.matmul(v4, probs, false, /*ty=*/true, "att_heads"), "att");  // [1, Q, 1, S]
  p.o = b.linear(p.att, "wo", l.wo, l.bo, "o");                                        // [1, C, 1, S]
  return p;
}

void check_kernel_args(const ModelWeights& w, int layer, int S, const char* kernel, const char* arch) {
  const ModelConfig& c = w.config;
  // The "llama" kernels compute the Llama block, which Llama's relatives (Qwen2, Qwen3, Mistral)
  // share with data-driven differences (llama_like.h): they take every RMSNorm + RoPE family.
  const Anatomy a = model_family(c.arch).anatomy();
  const bool llama_block = a.norm == NormKind::RMSNorm && a.positions == Positions::Rope;
  if (arch && std::string(arch_name(c.arch)) != arch && !(std::string(arch) == "llama" && llama_block))
    throw_usage_error(fmt::format("kernel {} is for {} models, this one is {}", kernel, arch, arch_name(c.arch)), "arch");
  if (layer < 0 || layer >= c.n_layers || size_t(layer) >= w.layers.size())
    throw_usage_error(fmt::format("kernel {}: layer {} is out of range (the model has {})", kernel, layer, c.n_layers),
                      "layer");
  if (S < 1) throw_usage_error(fmt::format("kernel {}: sequence length {} must be at least 1", kernel, S), "seq");
}

}  // namespace orion::frontends
