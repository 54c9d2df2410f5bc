// Helpers of the frontend tests: tiny models with weights large enough to make every term matter,
// conversions between the CPU's row-major [n, C] and the ANE's [1, C, 1, S], error measures and
// central finite differences through the reference interpreter.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "ir/interpret.h"
#include "model/frontends/frontends.h"
#include "model/weights.h"

namespace orion::test {

using ir::Tensor32;
using In = std::map<std::string, Tensor32>;

inline ModelConfig tiny_config(Arch arch, int n_kv_heads = 4) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 32, c.n_heads = 4, c.n_kv_heads = arch == Arch::GPT2 ? 4 : n_kv_heads, c.n_layers = 2;
  c.hidden_dim = arch == Arch::GPT2 ? 128 : 48;
  c.vocab_size = 80, c.padded_vocab = arch == Arch::GPT2 ? 96 : 80, c.seq_len = 32;
  c.validate("test");
  return c;
}

// random_weights with the matrices scaled by `gain` (std 0.02·gain) and random norms (1 ± 0.3) and
// biases (± 0.1), so that a missing bias, a wrong norm weight or a uniform attention would show.
inline ModelWeights test_weights(const ModelConfig& c, uint64_t seed, float gain) {
  ModelWeights w = random_weights(c, seed);
  std::mt19937 rng(uint32_t(seed) + 17);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& [name, t] : w.named_tensors_mut()) {
    float* p = const_cast<float*>(static_cast<const float*>(t->data));  // random_weights owns f32 buffers
    bool is_bias = name.find("norm") == std::string::npos && t->shape.size() == 1;
    for (int64_t i = 0; i < t->numel(); i++) {
      if (t->shape.size() == 2) p[i] *= gain;
      else if (is_bias) p[i] = 0.1f * u(rng);
      else if (name.size() > 2 && name.substr(name.size() - 2) == "_b") p[i] = 0.1f * u(rng);  // LayerNorm bias
      else p[i] = 1.0f + 0.3f * u(rng);                                                        // norm weight
    }
  }
  return w;
}

inline Tensor32 random_tensor(std::vector<int64_t> shape, uint32_t seed, float scale = 1.0f) {
  Tensor32 t(std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  for (float& v : t.data) v = n(rng);
  return t;
}

// Row-major [n, C] → [1, C, 1, S] (columns n..S−1 zero) and back.
inline Tensor32 to_ane(const std::vector<float>& x, int n, int C, int S) {
  Tensor32 t({1, C, 1, S});
  for (int s = 0; s < n; s++)
    for (int c = 0; c < C; c++) t.data[size_t(c * S + s)] = x[size_t(s * C + c)];
  return t;
}
inline std::vector<float> from_ane(const Tensor32& t, int n) {
  const int64_t C = t.shape[1], S = t.shape[3];
  std::vector<float> x(size_t(n * C));
  for (int s = 0; s < n; s++)
    for (int64_t c = 0; c < C; c++) x[size_t(s * C + c)] = t.data[size_t(c * S + s)];
  return x;
}

inline float max_abs(const std::vector<float>& a) {
  float m = 0;
  for (float v : a) m = std::max(m, std::fabs(v));
  return m;
}
inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); i++) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Every graph the frontends build must verify and contain nothing the ANE rejects outright.
inline void expect_valid(const ir::Graph& g) {
  EXPECT_EQ(g.verify(), "") << g.name();
  for (const ir::Node& n : g.nodes())
    EXPECT_FALSE(ir::op_info(n.op).flags & ir::kRejectedByAne) << g.name() << ": " << n.name;
  for (const ir::GraphOutput& o : g.outputs()) EXPECT_EQ(g.node(o.value).name, o.name) << g.name();
  // Every program input and output is [1, C, 1, S] (C14).
  auto boundary = [&](const ir::Type& t, const std::string& what) {
    EXPECT_TRUE(t.shape.size() == 4 && t.shape[0] == 1 && t.shape[2] == 1) << g.name() << ": " << what << " " << t.str();
  };
  for (int i : g.input_nodes()) boundary(g.node(i).results[0], g.node(i).name);
  for (const ir::GraphOutput& o : g.outputs()) boundary(g.type(o.value), o.name);
}

inline std::map<std::string, Tensor32> run(const ir::Graph& g, const In& in, bool round_fp16 = false) {
  return ir::interpret_named(g, in, {round_fp16});
}

// ∂/∂in[wrt] of L = Σ dy⊙out[output], by central differences (L summed in double).
inline std::vector<float> finite_difference(const ir::Graph& g, In in, const std::string& wrt, const std::string& output,
                                            const Tensor32& dy, float eps = 1e-2f) {
  auto loss = [&]() {
    Tensor32 y = ir::interpret_named(g, in).at(output);
    double L = 0;
    for (size_t i = 0; i < y.data.size(); i++) L += double(dy.data[i]) * y.data[i];
    return L;
  };
  std::vector<float> grad(in.at(wrt).data.size());
  for (size_t i = 0; i < grad.size(); i++) {
    float& v = in.at(wrt).data[i];
    const float v0 = v;
    v = v0 + eps;
    double lp = loss();
    v = v0 - eps;
    double lm = loss();
    v = v0;
    grad[i] = float((lp - lm) / (2.0 * eps));
  }
  return grad;
}

// max |a − b| relative to max(1, max |b|).
inline float rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  return max_abs_diff(a, b) / std::max(1.0f, max_abs(b));
}

}  // namespace orion::test
