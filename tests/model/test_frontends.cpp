// Frontends for inference: the GPT-2 kernels chained over every layer reproduce Transformer::forward
// (prefill and a decode step), the classifier and vocab softmax match the CPU, LoRA with B = 0 is
// the base model exactly, fp16 rounding stays within fp16 tolerance, and every graph verifies.
#include "frontend_test_util.h"

#include "base/error.h"
#include "model/transformer.h"
#include "runtime/cpu/kernels.h"

namespace orion::test {
namespace {

using namespace orion::frontends;
const KernelOptions kF32{ir::ElemType::F32};

// Residual stream at the input of layer 0: tok_emb[token] (+ pos_emb[pos]) per row   [n, C]
std::vector<float> embed(const ModelWeights& w, const std::vector<int>& tokens, int pos0) {
  const int C = w.config.dim;
  std::vector<float> x(tokens.size() * size_t(C)), p(static_cast<size_t>(C));
  for (size_t t = 0; t < tokens.size(); t++) {
    cpu::embedding_row(x.data() + t * C, w.tok_emb.data, w.tok_emb.dtype, tokens[t], C);
    if (w.config.arch == Arch::GPT2) {
      cpu::embedding_row(p.data(), w.pos_emb.data, w.pos_emb.dtype, pos0 + int(t), C);
      cpu::add_inplace(x.data() + t * C, p.data(), size_t(C));
    }
  }
  return x;
}

// final_norm → classifier_fwd: logits [1, V, 1, S]
Tensor32 head(const ModelWeights& w, const Tensor32& x, KernelOptions opt, bool round = false) {
  const int S = int(x.shape[3]);
  Tensor32 xn = run(final_norm(w, S, opt), {{"x", x}}, round).at("y");
  return run(classifier_fwd(w, S, 0, -1, opt), {{"x", xn}}, round).at("logits");
}

// GPT-2 prefill through the kernels: returns the logits [1, V, 1, S] and the per-layer K, V.
Tensor32 gpt2_prefill(const ModelWeights& w, const std::vector<int>& tokens, int S, KernelOptions opt, bool round,
                      std::vector<Tensor32>* K = nullptr, std::vector<Tensor32>* Vc = nullptr) {
  const int n = int(tokens.size()), C = w.config.dim;
  Tensor32 x = to_ane(embed(w, tokens, 0), n, C, S);
  for (int l = 0; l < w.config.n_layers; l++) {
    auto a = run(gpt2_prefill_attn(w, l, S, opt), {{"x", x}}, round);
    if (K) K->push_back(a.at("k")), Vc->push_back(a.at("v"));
    x = run(gpt2_prefill_ffn(w, l, S, opt), {{"x", a.at("y")}}, round).at("y");
  }
  return head(w, x, opt, round);
}

TEST(Frontends, Gpt2PrefillChainEqualsTransformerForward) {
  ModelConfig c = tiny_config(Arch::GPT2);
  ModelWeights w = test_weights(c, 1, 10.0f);
  std::vector<int> tokens{3, 17, 42, 5, 79};
  const int n = int(tokens.size()), V = c.vocab_size;
  Transformer tr(w);
  const float* all = tr.forward(tokens.data(), n, 0, /*all_logits=*/true);
  std::vector<float> want(all, all + n * V);
  for (int S : {5, 8}) {  // exact fit and a padded bucket
    std::vector<float> got = from_ane(gpt2_prefill(w, tokens, S, kF32, false), n);
    float err = max_abs_diff(got, want);
    EXPECT_LT(err, 1e-4f * std::max(1.0f, max_abs(want))) << "S=" << S;
    EXPECT_GT(max_abs(want), 0.1f);  // the comparison is not between near-zero numbers
    std::printf("gpt2 prefill S=%d: max |logit| %.3f, max abs error %.3g\n", S, max_abs(want), err);
  }
}

TEST(Frontends, Gpt2DecodeStepEqualsTransformerForward) {
  // Prefill 4 tokens through the kernels, then decode a 5th: the projections and FFN on the
  // "ANE" (interpreter), attention over the KV cache on the CPU.
  ModelConfig c = tiny_config(Arch::GPT2);
  ModelWeights w = test_weights(c, 2, 10.0f);
  const int C = c.dim, HS = c.head_dim(), V = c.vocab_size, S = 8, SB = 16;
  std::vector<int> tokens{7, 1, 63, 20};
  const int n = int(tokens.size()), next = 33;
  std::vector<Tensor32> K, Vc;
  gpt2_prefill(w, tokens, S, kF32, false, &K, &Vc);

  Tensor32 x = to_ane(embed(w, {next}, n), 1, C, SB);  // token in column 0 of a 16-column bucket
  for (int l = 0; l < c.n_layers; l++) {
    auto qkv = run(gpt2_decode_qkv(w, l, SB, kF32), {{"x", x}});
    // The CPU's cache: rows 0..n−1 from prefill, row n from this step.           [n + 1, C]
    std::vector<float> kc = from_ane(K[size_t(l)], n), vc = from_ane(Vc[size_t(l)], n);
    for (float f : from_ane(qkv.at("k"), 1)) kc.push_back(f);
    for (float f : from_ane(qkv.at("v"), 1)) vc.push_back(f);
    std::vector<float> q = from_ane(qkv.at("q"), 1), att(static_cast<size_t>(C));
    cpu::attention(att.data(), q.data(), kc.data(), vc.data(), 1, n, c.n_heads, c.n_kv_heads, cpu::KvLayout::rows(C, HS));
    x = run(gpt2_decode_ffn(w, l, SB, kF32), {{"x", x}, {"att", to_ane(att, 1, C, SB)}}).at("y");
  }
  std::vector<float> got = from_ane(head(w, x, kF32), 1);

  Transformer tr(w);
  tr.forward(tokens.data(), n, 0);
  const float* l = tr.forward(&next, 1, n);
  std::vector<float> want(l, l + V);
  float err = max_abs_diff(got, want);
  EXPECT_LT(err, 1e-4f * std::max(1.0f, max_abs(want)));
  std::printf("gpt2 decode: max |logit| %.3f, max abs error %.3g\n", max_abs(want), err);
}

TEST(Frontends, ClassifierRangesAndVocabSoftmaxMatchTheCpu) {
  ModelConfig c = tiny_config(Arch::GPT2);
  ModelWeights w = test_weights(c, 3, 10.0f);
  const int C = c.dim, S = 4, V = c.vocab_size;
  Tensor32 x = random_tensor({1, C, 1, S}, 5);
  std::vector<float> xr = from_ane(x, S), want(size_t(S * V));
  cpu::matmul(want.data(), xr.data(), w.classifier.data, w.classifier.dtype, nullptr, S, C, V);
  ir::Graph g = classifier_fwd(w, S, 0, -1, kF32);
  expect_valid(g);
  Tensor32 logits = run(g, {{"x", x}}).at("logits");
  EXPECT_EQ(logits.shape, (std::vector<int64_t>{1, V, 1, S}));  // the real vocabulary, not the padded one
  EXPECT_LT(max_abs_diff(from_ane(logits, S), want), 1e-5f);
  // Rows [10, 30) only.
  Tensor32 part = run(classifier_fwd(w, S, 10, 30, kF32), {{"x", x}}).at("logits");
  ASSERT_EQ(part.shape[1], 20);
  for (int s = 0; s < S; s++)
    for (int v = 0; v < 20; v++) EXPECT_NEAR(part.data[size_t(v * S + s)], want[size_t(s * V + 10 + v)], 1e-5f);
  EXPECT_THROW(classifier_fwd(w, S, 30, 10), Error);
  EXPECT_THROW(classifier_fwd(w, S, 0, 1000), Error);
  // Softmax over the vocabulary (the channels), per position.
  ir::Graph sm = vocab_softmax(V, S, kF32);
  expect_valid(sm);
  std::vector<float> probs = from_ane(run(sm, {{"logits", logits}}).at("probs"), S);
  for (int s = 0; s < S; s++) cpu::softmax_inplace(want.data() + s * V, V);
  EXPECT_LT(max_abs_diff(probs, want), 1e-6f);
}

// A plain linear layer y = W·x + b written directly with the graph API (the reference of LoRA).
ir::Graph plain_linear(const Tensor& W, const Tensor& b, int S) {
  ir::Graph g;
  const int64_t out = W.shape[0], in = W.shape[1];
  std::vector<float> wv(size_t(W.numel()));
  convert_dtype(W.data, W.dtype, wv.data(), DType::F32, wv.size());
  ir::Value x = g.input("x", {ir::ElemType::F32, {1, in, 1, S}});
  ir::Value y = g.add_node(ir::Op::Conv1x1, {x, g.constant_f32("w", {out, in, 1, 1}, wv, ir::ElemType::F32)});
  std::vector<float> bv(b.f32(), b.f32() + out);
  g.add_output("y", g.add_node(ir::Op::Add, {y, g.constant_f32("b", {1, out, 1, 1}, bv, ir::ElemType::F32)}));
  return g;
}

TEST(Frontends, LoraLinearIsTheBaseWithBZeroAndTheMergedWeightOtherwise) {
  ModelConfig c = tiny_config(Arch::GPT2);
  ModelWeights w = test_weights(c, 4, 10.0f);
  const LayerWeights& l = w.layers[0];
  const int S = 6, r = 3, out = c.hidden_dim, in = c.dim;
  const float alpha = 6.0f;  // scale = alpha / r = 2
  ir::Graph g = lora_linear(l.w1, l.b1, r, alpha, S, kF32);
  expect_valid(g);
  EXPECT_EQ(g.input_nodes().size(), 3u);  // x, lora_a, lora_b: the adapter is not baked in
  Tensor32 x = random_tensor({1, in, 1, S}, 6), A = random_tensor({1, r, 1, in}, 7, 0.3f);
  Tensor32 Bz({1, out, 1, r}, 0.0f);
  Tensor32 base = run(plain_linear(l.w1, l.b1, S), {{"x", x}}).at("y");
  EXPECT_EQ(run(g, {{"x", x}, {"lora_a", A}, {"lora_b", Bz}}).at("y").data, base.data);  // exactly
  // B ≠ 0: y = (W + 2·B·A)·x + b, with the merged weight computed on the CPU.
  Tensor32 B = random_tensor({1, out, 1, r}, 8, 0.3f);
  std::vector<float> merged(size_t(out * in));
  for (int o = 0; o < out; o++)
    for (int i = 0; i < in; i++) {
      double s = 0;
      for (int k = 0; k < r; k++) s += double(B.data[size_t(o * r + k)]) * A.data[size_t(k * in + i)];
      merged[size_t(o * in + i)] = l.w1.f32()[o * in + i] + float(2.0 * s);
    }
  std::vector<float> xr = from_ane(x, S), want(size_t(S * out));
  cpu::matmul(want.data(), xr.data(), merged.data(), DType::F32, l.b1.f32(), S, in, out);
  Tensor32 y = run(g, {{"x", x}, {"lora_a", A}, {"lora_b", B}}).at("y");
  EXPECT_LT(max_abs_diff(from_ane(y, S), want), 1e-4f);
  EXPECT_GT(max_abs_diff(y.data, base.data), 0.1f);  // the adapter did something
}

TEST(Frontends, LoraAttentionWithBZeroIsTheBaseAttentionExactly) {
  const int S = 8, r = 4;
  for (Arch arch : {Arch::GPT2, Arch::Llama}) {
    ModelConfig c = tiny_config(arch, 2);
    ModelWeights w = test_weights(c, 9, 10.0f);
    const int C = c.dim, Q = c.n_heads * c.head_dim(), KV = c.kv_dim();
    Tensor32 x = random_tensor({1, C, 1, S}, 10);
    In in{{"x", x},
          {"lora_a_q", random_tensor({1, r, 1, C}, 11)},
          {"lora_b_q", Tensor32({1, Q, 1, r}, 0.0f)},
          {"lora_a_v", random_tensor({1, r, 1, C}, 12)},
          {"lora_b_v", Tensor32({1, KV, 1, r}, 0.0f)}};
    for (auto [opt, round] : {std::pair{kF32, false}, {KernelOptions{}, true}}) {
      ir::Graph g = lora_attention(w, 1, S, r, 8.0f, opt);
      expect_valid(g);
      auto got = run(g, in, round);
      if (arch == Arch::GPT2) {
        auto want = run(gpt2_prefill_attn(w, 1, S, opt), {{"x", x}}, round);
        for (const char* o : {"y", "k", "v"}) EXPECT_EQ(got.at(o).data, want.at(o).data) << o;
      } else {
        auto want = run(llama_fwd_attn(w, 1, S, opt), {{"x", x}}, round);
        for (const char* o : {"k", "v"}) EXPECT_EQ(got.at(o).data, want.at(o).data) << o;
        // y = x + o, rounded as the kernel's own add is (and x was rounded on the way in).
        Tensor32 y = want.at("o");
        for (size_t i = 0; i < y.data.size(); i++)
          y.data[i] = round ? ir::round_to_fp16(ir::round_to_fp16(x.data[i]) + y.data[i]) : x.data[i] + y.data[i];
        EXPECT_EQ(got.at("y").data, y.data);
      }
    }
  }
}

TEST(Frontends, LoraAttentionAdaptsQAndV) {
  // With B ≠ 0 the kernel equals the base kernel run on merged weights Wq + s·Bq·Aq, Wv + s·Bv·Av.
  ModelConfig c = tiny_config(Arch::GPT2);
  ModelWeights w = test_weights(c, 13, 10.0f);
  const int C = c.dim, S = 8, r = 2;
  const float alpha = 1.0f;  // scale 1/2
  Tensor32 x = random_tensor({1, C, 1, S}, 14);
  Tensor32 aq = random_tensor({1, r, 1, C}, 15, 0.3f), bq = random_tensor({1, C, 1, r}, 16, 0.3f);
  Tensor32 av = random_tensor({1, r, 1, C}, 17, 0.3f), bv = random_tensor({1, C, 1, r}, 18, 0.3f);
  auto got = run(lora_attention(w, 0, S, r, alpha, kF32),
                 {{"x", x}, {"lora_a_q", aq}, {"lora_b_q", bq}, {"lora_a_v", av}, {"lora_b_v", bv}});
  ModelWeights m = test_weights(c, 13, 10.0f);  // the same weights, then merged
  for (auto [W, A, B] : {std::tuple{&m.layers[0].wq, &aq, &bq}, {&m.layers[0].wv, &av, &bv}}) {
    float* p = const_cast<float*>(W->f32());
    for (int o = 0; o < C; o++)
      for (int i = 0; i < C; i++)
        for (int k = 0; k < r; k++) p[o * C + i] += 0.5f * B->data[size_t(o * r + k)] * A->data[size_t(k * C + i)];
  }
  auto want = run(gpt2_prefill_attn(m, 0, S, kF32), {{"x", x}});
  for (const char* o : {"y", "k", "v"}) EXPECT_LT(max_abs_diff(got.at(o).data, want.at(o).data), 1e-4f) << o;
  auto base = run(gpt2_prefill_attn(w, 0, S, kF32), {{"x", x}});
  EXPECT_GT(max_abs_diff(got.at("y").data, base.at("y").data), 1e-2f);
  EXPECT_EQ(got.at("k").data, base.at("k").data);  // k has no adapter
}

TEST(Frontends, Fp16RoundingStaysWithinFp16Tolerance) {
  // The same prefill in three precisions: fp32 program; fp16 program computed in fp32; fp16
  // program with every result rounded to fp16 (what the ANE and anesim do).
  ModelConfig c = tiny_config(Arch::GPT2);
  ModelWeights w = test_weights(c, 21, 10.0f);
  std::vector<int> tokens{3, 17, 42, 5, 79, 11};
  const int S = 16, n = int(tokens.size());
  std::vector<float> f32 = from_ane(gpt2_prefill(w, tokens, S, kF32, false), n);
  std::vector<float> f16w = from_ane(gpt2_prefill(w, tokens, S, {}, false), n);
  std::vector<float> f16 = from_ane(gpt2_prefill(w, tokens, S, {}, true), n);
  float scale = max_abs(f32), e_w = max_abs_diff(f16w, f32), e_r = max_abs_diff(f16, f16w);
  std::printf("gpt2 prefill fp16: max |logit| %.3f, fp16 weights %.3g, fp16 rounding %.3g\n", scale, e_w, e_r);
  EXPECT_LT(e_w, 2e-2f * scale);
  EXPECT_LT(e_r, 2e-2f * scale);
  EXPECT_GT(e_r, 0.0f);  // rounding did happen
  // Greedy choices agree.
  for (int t = 0; t < n; t++) {
    auto argmax = [&](const std::vector<float>& v) {
      return std::max_element(v.begin() + t * c.vocab_size, v.begin() + (t + 1) * c.vocab_size) - v.begin();
    };
    EXPECT_EQ(argmax(f16), argmax(f32)) << "token " << t;
  }
}

TEST(Frontends, EveryKernelVerifiesOnEveryFamily) {
  ModelConfig g2 = tiny_config(Arch::GPT2), ll = tiny_config(Arch::Llama, 2);
  ModelWeights wg = random_weights(g2, 1), wl = random_weights(ll, 1);
  const int S = 16;
  std::vector<ir::Graph> graphs{gpt2_prefill_attn(wg, 1, S),
                                gpt2_prefill_ffn(wg, 1, S),
                                gpt2_decode_qkv(wg, 1, S),
                                gpt2_decode_ffn(wg, 1, S),
                                final_norm(wg, S),
                                llama_fwd_attn(wl, 1, S),
                                llama_fwd_ffn(wl, 1, S),
                                llama_ffn_bwd(wl, 1, S),
                                sdpa_bwd1(wl, 1, S),
                                sdpa_bwd2(ll, S),
                                llama_qkv_bwd(wl, 1, S),
                                classifier_fwd(wg, S),
                                vocab_softmax(g2.vocab_size, S),
                                lora_linear(wl.layers[0].wq, {}, 4, 8.0f, S),
                                lora_attention(wl, 0, S, 4, 8.0f),
                                final_norm(wl, S),
                                lora_attention(wg, 0, S, 4, 8.0f)};
  for (const ir::Graph& g : graphs) {
    expect_valid(g);
    for (const ir::Node& n : g.nodes())  // fp16 everywhere by default (the ANE's type)
      for (const ir::Type& t : n.results) EXPECT_EQ(t.elem, ir::ElemType::F16) << g.name() << ": " << n.name;
  }
  // Wrong family, layer out of range, bad sequence length: usage errors naming the problem.
  EXPECT_THROW(gpt2_prefill_attn(wl, 0, S), Error);
  EXPECT_THROW(llama_fwd_attn(wg, 0, S), Error);
  expect_valid(sdpa_bwd2(g2, S));  // weight-free: serves GPT-2 training as well
  EXPECT_THROW(gpt2_prefill_ffn(wg, 2, S), Error);
  EXPECT_THROW(gpt2_decode_qkv(wg, 0, 0), Error);
  EXPECT_THROW(lora_linear(wl.layers[0].wq, {}, 0, 8.0f, S), Error);
}

TEST(Frontends, LinearLayersAreConvolutionsWithFp16WeightConstants) {
  ModelConfig c = tiny_config(Arch::GPT2);
  ModelWeights w = random_weights(c, 1);
  ir::Graph g = gpt2_prefill_ffn(w, 0, 16);
  int convs = 0, adds_of_bias = 0;
  for (const ir::Node& n : g.nodes()) {
    if (n.op == ir::Op::Conv1x1) {
      convs++;
      EXPECT_EQ(n.inputs.size(), 2u);  // no bias operand (C4)
      const ir::Node& wn = g.node(n.inputs[1]);
      EXPECT_EQ(wn.op, ir::Op::Const);
      EXPECT_EQ(wn.results[0].elem, ir::ElemType::F16);
    }
    if (n.op == ir::Op::Add && (n.name == "fc" || n.name == "proj")) adds_of_bias++;
  }
  EXPECT_EQ(convs, 2);
  EXPECT_EQ(adds_of_bias, 2);
  // W1 [H, C] → [H, C, 1, 1]; element (o, i) is W1[o, i].
  const ir::Node& w1 = g.node(g.find("w1"));
  EXPECT_EQ(w1.results[0].shape, (std::vector<int64_t>{c.hidden_dim, c.dim, 1, 1}));
  Tensor32 v = ir::const_values(w1);
  EXPECT_EQ(v.data[size_t(5 * c.dim + 7)], ir::round_to_fp16(w.layers[0].w1.f32()[5 * c.dim + 7]));
}

}  // namespace
}  // namespace orion::test
