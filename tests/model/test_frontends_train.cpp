// Llama training kernels: the forward kernels chained over every layer reproduce
// Transformer::forward and their saved activations match the CPU kernels; every backward kernel is
// checked against central finite differences of the corresponding forward, run by the reference
// interpreter in fp32 (with and without grouped-query attention).
#include "frontend_test_util.h"

#include <functional>

#include "base/error.h"
#include "model/transformer.h"
#include "runtime/cpu/kernels.h"

namespace orion::test {
namespace {

using namespace orion::frontends;
using ir::ElemType;
using ir::Op;
const KernelOptions kF32{ElemType::F32};

ir::Value weight_f32(ir::Graph& g, const std::string& name, const Tensor& W) {
  std::vector<float> v(W.f32(), W.f32() + W.numel());
  return g.constant_f32(name, {W.shape[0], W.shape[1], 1, 1}, v, ElemType::F32);
}

// Forward of one Llama block through the kernels (the CPU adds the residuals).
Tensor32 block_forward(const ModelWeights& w, int l, const Tensor32& x) {
  const int S = int(x.shape[3]);
  Tensor32 h = x;
  Tensor32 o = run(llama_fwd_attn(w, l, S, kF32), {{"x", x}}).at("o");
  for (size_t i = 0; i < h.data.size(); i++) h.data[i] += o.data[i];
  Tensor32 y = run(llama_fwd_ffn(w, l, S, kF32), {{"x", h}}).at("y");
  for (size_t i = 0; i < h.data.size(); i++) h.data[i] += y.data[i];
  return h;
}

TEST(FrontendsTrain, StoriesForwardChainEqualsTransformerForward) {
  for (int nkv : {4, 2}) {
    ModelConfig c = tiny_config(Arch::Llama, nkv);
    ModelWeights w = test_weights(c, 31, 10.0f);
    std::vector<int> tokens{1, 40, 7, 79, 23, 8};
    const int n = int(tokens.size()), C = c.dim, V = c.vocab_size;
    for (int S : {6, 8}) {
      std::vector<float> x(size_t(n * C));
      for (int t = 0; t < n; t++)
        cpu::embedding_row(x.data() + t * C, w.tok_emb.data, w.tok_emb.dtype, tokens[size_t(t)], C);
      Tensor32 h = to_ane(x, n, C, S);
      for (int l = 0; l < c.n_layers; l++) h = block_forward(w, l, h);
      Tensor32 xn = run(final_norm(w, S, kF32), {{"x", h}}).at("y");
      std::vector<float> got = from_ane(run(classifier_fwd(w, S, 0, -1, kF32), {{"x", xn}}).at("logits"), n);
      Transformer tr(w);
      const float* all = tr.forward(tokens.data(), n, 0, true);
      std::vector<float> want(all, all + n * V);
      float err = max_abs_diff(got, want);
      EXPECT_LT(err, 1e-4f * std::max(1.0f, max_abs(want))) << "NKV=" << nkv << " S=" << S;
      EXPECT_GT(max_abs(want), 0.1f);
      std::printf("stories forward NKV=%d S=%d: max |logit| %.3f, max abs error %.3g\n", nkv, S, max_abs(want), err);
    }
  }
}

TEST(FrontendsTrain, SavedActivationsMatchTheCpuKernels) {
  ModelConfig c = tiny_config(Arch::Llama, 2);
  ModelWeights w = test_weights(c, 32, 10.0f);
  const LayerWeights& l = w.layers[1];
  const int S = 7, C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS, KV = c.kv_dim(), H = c.hidden_dim;
  Tensor32 x = random_tensor({1, C, 1, S}, 33);
  std::vector<float> xr = from_ane(x, S);
  // CPU: xnorm, q, k (RoPE), v, att, o
  std::vector<float> xn(size_t(S * C)), q(size_t(S * Q)), k(size_t(S * KV)), v(size_t(S * KV)), att(size_t(S * Q)),
      o(size_t(S * C));
  cpu::rmsnorm(xn.data(), xr.data(), l.attn_norm.f32(), S, C, c.norm_eps);
  cpu::matmul(q.data(), xn.data(), l.wq.data, l.wq.dtype, nullptr, S, C, Q);
  cpu::matmul(k.data(), xn.data(), l.wk.data, l.wk.dtype, nullptr, S, C, KV);
  cpu::matmul(v.data(), xn.data(), l.wv.data, l.wv.dtype, nullptr, S, C, KV);
  for (int t = 0; t < S; t++) {
    cpu::rope(q.data() + t * Q, c.n_heads, HS, t, c.rope_theta);
    cpu::rope(k.data() + t * KV, c.n_kv_heads, HS, t, c.rope_theta);
  }
  cpu::attention(att.data(), q.data(), k.data(), v.data(), S, 0, c.n_heads, c.n_kv_heads, cpu::KvLayout::rows(KV, HS));
  cpu::matmul(o.data(), att.data(), l.wo.data, l.wo.dtype, nullptr, S, Q, C);
  auto a = run(llama_fwd_attn(w, 1, S, kF32), {{"x", x}});
  for (auto [name, want] : {std::pair{"xnorm", &xn}, {"q", &q}, {"k", &k}, {"v", &v}, {"att", &att}, {"o", &o}})
    EXPECT_LT(max_abs_diff(from_ane(a.at(name), S), *want), 1e-5f * std::max(1.0f, max_abs(*want))) << name;
  // fwd_ffn: xnorm, h1, h3, gate = silu(h1)⊙h3, y
  std::vector<float> xn2(size_t(S * C)), h1(size_t(S * H)), h3(size_t(S * H)), gate(size_t(S * H)), y(size_t(S * C));
  cpu::rmsnorm(xn2.data(), xr.data(), l.ffn_norm.f32(), S, C, c.norm_eps);
  cpu::matmul(h1.data(), xn2.data(), l.w1.data, l.w1.dtype, nullptr, S, C, H);
  cpu::matmul(h3.data(), xn2.data(), l.w3.data, l.w3.dtype, nullptr, S, C, H);
  cpu::swiglu(gate.data(), h1.data(), h3.data(), gate.size());
  cpu::matmul(y.data(), gate.data(), l.w2.data, l.w2.dtype, nullptr, S, H, C);
  auto f = run(llama_fwd_ffn(w, 1, S, kF32), {{"x", x}});
  for (auto [name, want] : {std::pair{"xnorm", &xn2}, {"h1", &h1}, {"h3", &h3}, {"gate", &gate}, {"y", &y}})
    EXPECT_LT(max_abs_diff(from_ane(f.at(name), S), *want), 1e-5f * std::max(1.0f, max_abs(*want))) << name;
}

// Checks a gradient against finite differences and prints the error.
void expect_gradient(const std::string& what, const std::vector<float>& got, const std::vector<float>& fd) {
  float e = rel_err(got, fd);
  std::printf("  %-28s max |grad| %8.4f  rel error %.3g\n", what.c_str(), max_abs(fd), e);
  EXPECT_LT(e, 2e-3f) << what;
  EXPECT_GT(max_abs(fd), 1e-2f) << what << ": the gradient is too small to test anything";
}

TEST(FrontendsTrain, FfnBackwardMatchesFiniteDifferences) {
  for (int nkv : {4, 2}) {
    ModelConfig c = tiny_config(Arch::Llama, nkv);
    ModelWeights w = test_weights(c, 41, 15.0f);
    const LayerWeights& l = w.layers[0];
    const int S = 5, C = c.dim, H = c.hidden_dim;
    Tensor32 x = random_tensor({1, C, 1, S}, 42), dy = random_tensor({1, C, 1, S}, 43);
    ir::Graph fwd = llama_fwd_ffn(w, 0, S, kF32);
    auto f = run(fwd, {{"x", x}});
    ir::Graph bwd = llama_ffn_bwd(w, 0, S, kF32);
    expect_valid(bwd);
    auto b = run(bwd, {{"dy", dy}, {"x", x}, {"h1", f.at("h1")}, {"h3", f.at("h3")}});
    std::printf("ffn_bwd NKV=%d\n", nkv);
    // dx: L = Σ dy⊙y(x) through the whole fwd_ffn kernel (norm included).
    expect_gradient("dx", b.at("dx").data, finite_difference(fwd, {{"x", x}}, "x", "y", dy));
    // dh1, dh3: y = W2·(silu(h1)⊙h3), written directly.
    ir::Graph g;
    ir::Value h1 = g.input("h1", {ElemType::F32, {1, H, 1, S}}), h3 = g.input("h3", {ElemType::F32, {1, H, 1, S}});
    ir::Value gate = g.add_node(Op::Mul, {g.add_node(Op::Silu, {h1}), h3});
    g.add_output("y", g.add_node(Op::Conv1x1, {gate, weight_f32(g, "w2", l.w2)}));
    In hin{{"h1", f.at("h1")}, {"h3", f.at("h3")}};
    expect_gradient("dh1", b.at("dh1").data, finite_difference(g, hin, "h1", "y", dy));
    expect_gradient("dh3", b.at("dh3").data, finite_difference(g, hin, "h3", "y", dy));
    // dxnorm: y = W2·(silu(W1·xn)⊙W3·xn).
    ir::Graph g2;
    ir::Value xn = g2.input("xn", {ElemType::F32, {1, C, 1, S}});
    ir::Value a1 = g2.add_node(Op::Conv1x1, {xn, weight_f32(g2, "w1", l.w1)});
    ir::Value a3 = g2.add_node(Op::Conv1x1, {xn, weight_f32(g2, "w3", l.w3)});
    ir::Value gt = g2.add_node(Op::Mul, {g2.add_node(Op::Silu, {a1}), a3});
    g2.add_output("y", g2.add_node(Op::Conv1x1, {gt, weight_f32(g2, "w2", l.w2)}));
    expect_gradient("dxnorm", b.at("dxnorm").data, finite_difference(g2, {{"xn", f.at("xnorm")}}, "xn", "y", dy));
  }
}

// o = Wo·attention(q, k, v) written independently of the frontends: kv heads expanded by a 0/1
// convolution, heads moved to [1, NH, S, HS] by transposes, and the `attention` composite.
ir::Graph attention_core(const ModelConfig& c, const LayerWeights& l, int S) {
  const int64_t NH = c.n_heads, HS = c.head_dim(), Q = NH * HS, KV = c.kv_dim(), G = NH / c.n_kv_heads;
  ir::Graph g;
  ir::Value q = g.input("q", {ElemType::F32, {1, Q, 1, S}});
  ir::Value k = g.input("k", {ElemType::F32, {1, KV, 1, S}}), v = g.input("v", {ElemType::F32, {1, KV, 1, S}});
  std::vector<float> E(size_t(Q * KV), 0.0f);  // channel h·HS + d reads kv channel (h/G)·HS + d
  for (int64_t h = 0; h < NH; h++)
    for (int64_t d = 0; d < HS; d++) E[size_t((h * HS + d) * KV + (h / G) * HS + d)] = 1.0f;
  ir::Value e = g.constant_f32("expand", {Q, KV, 1, 1}, E, ElemType::F32);
  auto to_heads = [&](ir::Value x) {  // [1, Q, 1, S] → [1, NH, S, HS]
    ir::Value r = g.add_node(Op::Reshape, {x}, {{"shape", std::vector<int64_t>{1, NH, HS, S}}});
    return g.add_node(Op::Transpose, {r}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  };
  std::vector<float> mask(size_t(S * S), 0.0f);
  for (int i = 0; i < S; i++)
    for (int j = i + 1; j < S; j++) mask[size_t(i * S + j)] = -1e9f;
  ir::Value m = g.constant_f32("mask", {1, 1, S, S}, mask, ElemType::F32);
  ir::Value att = g.add_node(Op::Attention, {to_heads(q), to_heads(g.add_node(Op::Conv1x1, {k, e})),
                                             to_heads(g.add_node(Op::Conv1x1, {v, e})), m});
  ir::Value back = g.add_node(Op::Transpose, {att}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  ir::Value flat = g.add_node(Op::Reshape, {back}, {{"shape", std::vector<int64_t>{1, Q, 1, S}}});
  g.add_output("o", g.add_node(Op::Conv1x1, {flat, weight_f32(g, "wo", l.wo)}));
  return g;
}

TEST(FrontendsTrain, AttentionBackwardMatchesFiniteDifferences) {
  for (int nkv : {4, 2}) {
    ModelConfig c = tiny_config(Arch::Llama, nkv);
    ModelWeights w = test_weights(c, 51, 15.0f);
    const LayerWeights& l = w.layers[1];
    const int S = 6, C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS, KV = c.kv_dim();
    Tensor32 x = random_tensor({1, C, 1, S}, 52), dy = random_tensor({1, C, 1, S}, 53);
    ir::Graph fwd = llama_fwd_attn(w, 1, S, kF32);
    auto f = run(fwd, {{"x", x}});
    // The backward chain: sdpa_bwd1 → sdpa_bwd2 → qkv_bwd.
    ir::Graph g1 = sdpa_bwd1(w, 1, S, kF32), g2 = sdpa_bwd2(c, S, kF32), g3 = llama_qkv_bwd(w, 1, S, kF32);
    for (const ir::Graph* g : {&g1, &g2, &g3}) expect_valid(*g);
    auto b1 = run(g1, {{"dy", dy}, {"q", f.at("q")}, {"k", f.at("k")}, {"v", f.at("v")}});
    auto b2 = run(g2, {{"probs", b1.at("probs")}, {"dprobs", b1.at("dprobs")}, {"q", f.at("q")}, {"k", f.at("k")}});
    auto b3 = run(g3, {{"dq", b2.at("dq")}, {"dk", b2.at("dk")}, {"dv", b1.at("dv")}, {"x", x}});
    std::printf("attention backward NKV=%d\n", nkv);
    // dq, dk, dv against an independent forward of o(q, k, v).
    ir::Graph core = attention_core(c, l, S);
    In qkv{{"q", f.at("q")}, {"k", f.at("k")}, {"v", f.at("v")}};
    Tensor32 o_core = run(core, qkv).at("o");
    EXPECT_LT(max_abs_diff(o_core.data, f.at("o").data), 1e-5f);  // the two forwards agree
    expect_gradient("dq (sdpa_bwd2)", b2.at("dq").data, finite_difference(core, qkv, "q", "o", dy));
    expect_gradient("dk (sdpa_bwd2)", b2.at("dk").data, finite_difference(core, qkv, "k", "o", dy));
    expect_gradient("dv (sdpa_bwd1)", b1.at("dv").data, finite_difference(core, qkv, "v", "o", dy));
    // The whole chain: dx of L = Σ dy⊙o(x) through fwd_attn (norm, projections, RoPE, attention).
    expect_gradient("dx (qkv_bwd)", b3.at("dx").data, finite_difference(fwd, {{"x", x}}, "x", "o", dy));
    // dq_lin, dk_lin are the transposed RoPE of dq, dk: <dq_lin, r> = <dq, rope(r)> for any r
    // (rope from the CPU kernels); dxnorm is Wqᵀ·dq_lin + Wkᵀ·dk_lin + Wvᵀ·dv: <dxnorm, r> =
    // <dq_lin, Wq·r> + <dk_lin, Wk·r> + <dv, Wv·r>.
    auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
      double s = 0;
      for (size_t i = 0; i < a.size(); i++) s += double(a[i]) * b[i];
      return s;
    };
    for (auto [lin, rot, heads, ch] : {std::tuple{"dq_lin", "dq", c.n_heads, Q}, {"dk_lin", "dk", c.n_kv_heads, KV}}) {
      std::vector<float> r = random_tensor({S, ch}, 54).data, rr = r;  // row-major [S, ch]
      for (int t = 0; t < S; t++) cpu::rope(rr.data() + t * ch, heads, HS, t, c.rope_theta);
      double lhs = dot(from_ane(b3.at(lin), S), r), rhs = dot(from_ane(b2.at(rot), S), rr);
      EXPECT_NEAR(lhs, rhs, 1e-4 * std::max(1.0, std::fabs(rhs))) << lin;
    }
    std::vector<float> r = random_tensor({S, C}, 55).data, rq(size_t(S * Q)), rk(size_t(S * KV)), rv(size_t(S * KV));
    cpu::matmul(rq.data(), r.data(), l.wq.data, l.wq.dtype, nullptr, S, C, Q);
    cpu::matmul(rk.data(), r.data(), l.wk.data, l.wk.dtype, nullptr, S, C, KV);
    cpu::matmul(rv.data(), r.data(), l.wv.data, l.wv.dtype, nullptr, S, C, KV);
    double lhs = dot(from_ane(b3.at("dxnorm"), S), r);
    double rhs =
        dot(from_ane(b3.at("dq_lin"), S), rq) + dot(from_ane(b3.at("dk_lin"), S), rk) + dot(from_ane(b1.at("dv"), S), rv);
    EXPECT_NEAR(lhs, rhs, 1e-4 * std::max(1.0, std::fabs(rhs)));
    // probs are a causal softmax: rows sum to 1, nothing above the diagonal.
    const Tensor32& p = b1.at("probs");
    for (int h = 0; h < c.n_heads; h++)
      for (int i = 0; i < S; i++) {
        double sum = 0;
        for (int j = 0; j < S; j++) {
          float pij = p.data[size_t((h * S + i) * S + j)];
          sum += pij;
          if (j > i) {
            EXPECT_EQ(pij, 0.0f);
          }
        }
        EXPECT_NEAR(sum, 1.0, 1e-6);
      }
  }
}

TEST(FrontendsTrain, Fp16TrainingKernelsStayWithinFp16Tolerance) {
  // Each training kernel in fp16 with rounding after every op, against the same program in fp32.
  ModelConfig c = tiny_config(Arch::Llama, 2);
  ModelWeights w = test_weights(c, 61, 10.0f);
  const int S = 16, C = c.dim, H = c.hidden_dim, Q = c.n_heads * c.head_dim(), KV = c.kv_dim();
  In in{{"x", random_tensor({1, C, 1, S}, 62)},   {"dy", random_tensor({1, C, 1, S}, 63)},
        {"h1", random_tensor({1, H, 1, S}, 64)},  {"h3", random_tensor({1, H, 1, S}, 65)},
        {"q", random_tensor({1, Q, 1, S}, 66)},   {"k", random_tensor({1, KV, 1, S}, 67)},
        {"v", random_tensor({1, KV, 1, S}, 68)},  {"dq", random_tensor({1, Q, 1, S}, 69)},
        {"dk", random_tensor({1, KV, 1, S}, 70)}, {"dv", random_tensor({1, KV, 1, S}, 71)}};
  auto p32 = run(sdpa_bwd1(w, 0, S, kF32), in);
  in["probs"] = p32.at("probs"), in["dprobs"] = p32.at("dprobs");
  using Build = std::function<ir::Graph(KernelOptions)>;
  std::vector<std::pair<const char*, Build>> kernels{{"fwd_attn",
                                                      [&](KernelOptions o) { return llama_fwd_attn(w, 0, S, o); }},
                                                     {"fwd_ffn", [&](KernelOptions o) { return llama_fwd_ffn(w, 0, S, o); }},
                                                     {"ffn_bwd", [&](KernelOptions o) { return llama_ffn_bwd(w, 0, S, o); }},
                                                     {"sdpa_bwd1", [&](KernelOptions o) { return sdpa_bwd1(w, 0, S, o); }},
                                                     {"sdpa_bwd2", [&](KernelOptions o) { return sdpa_bwd2(c, S, o); }},
                                                     {"qkv_bwd",
                                                      [&](KernelOptions o) { return llama_qkv_bwd(w, 0, S, o); }}};
  for (auto& [name, build] : kernels) {
    ir::Graph g32 = build(kF32), g16 = build({});
    In feed;
    for (int i : g32.input_nodes()) feed[g32.node(i).name] = in.at(g32.node(i).name);
    auto a = run(g32, feed), b = run(g16, feed, /*round_fp16=*/true);
    for (auto& [out, t] : a) {
      float scale = std::max(1e-3f, max_abs(t.data)), e = max_abs_diff(b.at(out).data, t.data);
      std::printf("  %-9s %-7s max |y| %8.4f  fp16 error %.3g (%.2g relative)\n", name, out.c_str(), scale, e, e / scale);
      EXPECT_LT(e, 2e-2f * scale) << name << "." << out;
    }
  }
}

}  // namespace
}  // namespace orion::test
