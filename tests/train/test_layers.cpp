// Every layer's backward against central finite differences of its forward, in double.
//
// For a layer y = f(x, w), take a fixed random projection r and the scalar L = Σ r ⊙ y. Then
// ∂L/∂y = r, so backward(dout = r) must give ∂L/∂x and ∂L/∂w, which we compare element by element
// with (L(x + h·e_i) − L(x − h·e_i)) / 2h. In double with h = 1e-5 the quotient is accurate to
// ~1e-9 relative, so a tolerance of 1e-6 catches any wrong term. Gradients are pre-filled with a
// constant to check that the backward accumulates (+=) as layers.h promises.
// The float versions of the forwards are also compared with the inference kernels (runtime/cpu).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu/kernels.h"
#include "train/cpu/layers.h"

using namespace orion;
using namespace orion::train;

namespace {

using Vec = std::vector<double>;

Vec randn(size_t n, uint64_t seed, double scale = 1.0, double mean = 0.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(mean, scale);
  Vec v(n);
  for (double& x : v) x = d(rng);
  return v;
}

struct Var {
  std::string name;
  Vec* x;   // the input or parameter
  Vec* dx;  // its gradient as the backward computes it
};

// Checks every element of every var. `loss` runs the forward and returns Σ r ⊙ y; `backward`
// runs forward then backward with dout = r into the (pre-filled) gradients.
void check_layer(const std::string& layer, const std::function<double()>& loss, const std::function<void()>& backward,
                 std::vector<Var> vars, bool accumulates = true, double h = 1e-5, double tol = 1e-6) {
  constexpr double kPrefill = 0.25;
  for (Var& v : vars) std::fill(v.dx->begin(), v.dx->end(), accumulates ? kPrefill : 0.0);
  backward();
  for (Var& v : vars) {
    double max_err = 0, max_grad = 0;
    for (size_t i = 0; i < v.x->size(); i++) {
      const double keep = (*v.x)[i];
      (*v.x)[i] = keep + h;
      const double lp = loss();
      (*v.x)[i] = keep - h;
      const double lm = loss();
      (*v.x)[i] = keep;
      const double numeric = (lp - lm) / (2 * h);
      const double analytic = (*v.dx)[i] - (accumulates ? kPrefill : 0.0);
      max_err = std::max(max_err, std::abs(analytic - numeric));
      max_grad = std::max(max_grad, std::abs(numeric));
    }
    const double rel = max_err / std::max(max_grad, 1e-12);
    SCOPED_TRACE(layer + " d" + v.name);
    EXPECT_GT(max_grad, 1e-3) << "the check is vacuous: the gradient is ~0";
    EXPECT_LT(rel, tol) << "max |analytic − numeric| = " << max_err << ", max |grad| = " << max_grad;
    std::printf("  %-12s d%-6s max|grad| %.3e  max rel err %.2e\n", layer.c_str(), v.name.c_str(), max_grad, rel);
  }
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

constexpr int B = 2, T = 5, C = 8;
constexpr int N = B * T;

}  // namespace

TEST(TrainLayers, EncoderBackward) {
  const int Vp = 7;
  std::vector<int> tokens = {3, 1, 3, 0, 6, 3, 2, 1, 5, 5};  // repeats: gradients must add up
  Vec wte = randn(size_t(Vp) * C, 1), wpe = randn(size_t(T) * C, 2), dwte(wte.size()), dwpe(wpe.size());
  Vec out(size_t(N) * C), r = randn(out.size(), 3);
  for (bool positions : {true, false}) {
    auto fwd = [&] {
      encoder_forward(out.data(), tokens.data(), wte.data(), positions ? wpe.data() : nullptr, B, T, C);
      return dot(out, r);
    };
    auto bwd = [&] {
      fwd();
      encoder_backward(dwte.data(), positions ? dwpe.data() : nullptr, r.data(), tokens.data(), B, T, C);
    };
    std::vector<Var> vars = {{"wte", &wte, &dwte}};
    if (positions) vars.push_back({"wpe", &wpe, &dwpe});
    check_layer(positions ? "encoder+pos" : "encoder", fwd, bwd, vars);
  }
}

TEST(TrainLayers, RmsnormBackward) {
  Vec x = randn(size_t(N) * C, 4), w = randn(C, 5, 0.3, 1.0), dx(x.size()), dw(w.size());
  Vec out(x.size()), rstd(N), r = randn(out.size(), 6);
  auto fwd = [&] {
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    return dot(out, r);
  };
  auto bwd = [&] {
    fwd();
    rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), N, C);
  };
  check_layer("rmsnorm", fwd, bwd, {{"x", &x, &dx}, {"w", &w, &dw}});
}

TEST(TrainLayers, LayernormBackward) {
  Vec x = randn(size_t(N) * C, 7, 1.0, 0.5), w = randn(C, 8, 0.3, 1.0), b = randn(C, 9, 0.3);
  Vec dx(x.size()), dw(C), db(C), out(x.size()), mean(N), rstd(N), r = randn(out.size(), 10);
  auto fwd = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    return dot(out, r);
  };
  auto bwd = [&] {
    fwd();
    layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  };
  check_layer("layernorm", fwd, bwd, {{"x", &x, &dx}, {"w", &w, &dw}, {"b", &b, &db}});
}

TEST(TrainLayers, MatmulBackward) {
  const int IC = 6, OC = 5;
  Vec x = randn(size_t(N) * IC, 11), W = randn(size_t(OC) * IC, 12), bias = randn(OC, 13);
  Vec dx(x.size()), dW(W.size()), db(OC), out(size_t(N) * OC), r = randn(out.size(), 14);
  auto fwd = [&] {
    matmul_forward(out.data(), x.data(), W.data(), bias.data(), N, IC, OC);
    return dot(out, r);
  };
  auto bwd = [&] {
    fwd();
    matmul_backward(dx.data(), dW.data(), db.data(), r.data(), x.data(), W.data(), N, IC, OC);
  };
  check_layer("matmul", fwd, bwd, {{"x", &x, &dx}, {"W", &W, &dW}, {"bias", &bias, &db}});
}

TEST(TrainLayers, RopeBackward) {
  const int NHx = 3, HS = 4;
  Vec x = randn(size_t(N) * NHx * HS, 15), dx(x.size()), out(x.size()), r = randn(out.size(), 16);
  auto fwd = [&] {
    rope_forward(out.data(), x.data(), B, T, NHx, HS, 10000.0f);
    return dot(out, r);
  };
  auto bwd = [&] {
    fwd();
    rope_backward(dx.data(), r.data(), B, T, NHx, HS, 10000.0f);
  };
  check_layer("rope", fwd, bwd, {{"x", &x, &dx}}, /*accumulates=*/false);
}

// Multi-head (NKV = NH) and grouped-query attention (two query heads per kv head).
TEST(TrainLayers, AttentionBackward) {
  const int HS = 4;
  for (auto heads : {std::pair{2, 2}, std::pair{4, 2}, std::pair{4, 1}}) {
    const int NH = heads.first, NKV = heads.second;  // not a structured binding: lambdas capture it (clang 14)
    Vec q = randn(size_t(N) * NH * HS, 17), k = randn(size_t(N) * NKV * HS, 18), v = randn(size_t(N) * NKV * HS, 19);
    Vec dq(q.size()), dk(k.size()), dv(v.size()), out(q.size()), att(size_t(B) * NH * T * T);
    Vec r = randn(out.size(), 20);
    auto fwd = [&] {
      attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HS);
      return dot(out, r);
    };
    auto bwd = [&] {
      fwd();
      attention_backward(dq.data(), dk.data(), dv.data(), r.data(), att.data(), q.data(), k.data(), v.data(), B, T, NH, NKV,
                         HS);
    };
    check_layer("attn " + std::to_string(NH) + "/" + std::to_string(NKV), fwd, bwd,
                {{"q", &q, &dq}, {"k", &k, &dk}, {"v", &v, &dv}});
  }
}

TEST(TrainLayers, SwigluBackward) {
  const size_t n = 40;
  Vec g = randn(n, 21, 2.0), u = randn(n, 22), dg(n), du(n), out(n), r = randn(n, 23);
  auto fwd = [&] {
    swiglu_forward(out.data(), g.data(), u.data(), n);
    return dot(out, r);
  };
  auto bwd = [&] {
    fwd();
    swiglu_backward(dg.data(), du.data(), r.data(), g.data(), u.data(), n);
  };
  check_layer("swiglu", fwd, bwd, {{"gate", &g, &dg}, {"up", &u, &du}});
}

// Both ways: the backward recomputing the tanh, and using the one the forward kept.
TEST(TrainLayers, GeluBackward) {
  const size_t n = 40;
  Vec x = randn(n, 24, 2.0), dx(n), out(n), th(n), r = randn(n, 25);
  for (bool keep : {false, true}) {
    auto fwd = [&] {
      gelu_forward(out.data(), keep ? th.data() : nullptr, x.data(), n);
      return dot(out, r);
    };
    auto bwd = [&] {
      fwd();
      gelu_backward(dx.data(), r.data(), x.data(), keep ? th.data() : nullptr, n);
    };
    check_layer(keep ? "gelu (kept tanh)" : "gelu", fwd, bwd, {{"x", &x, &dx}});
  }
}

TEST(TrainLayers, ResidualBackward) {
  const size_t n = 20;
  Vec a = randn(n, 26), b = randn(n, 27), da(n), db(n), out(n), r = randn(n, 28);
  auto fwd = [&] {
    residual_forward(out.data(), a.data(), b.data(), n);
    return dot(out, r);
  };
  auto bwd = [&] {
    fwd();
    residual_backward(da.data(), db.data(), r.data(), n);
  };
  check_layer("residual", fwd, bwd, {{"a", &a, &da}, {"b", &b, &db}});
}

// L = scale · Σ_n losses[n] with an ignored position (target −1), whose row gets no gradient.
TEST(TrainLayers, CrossentropyBackward) {
  const int V = 9;
  std::vector<int> targets = {3, 0, 8, -1, 2, 2, 7, 1, -1, 4};
  Vec logits = randn(size_t(N) * V, 29, 2.0), dlogits(logits.size()), losses(N), lse(N);
  const double scale = 0.7;
  int count = 0;
  auto fwd = [&] {
    count = crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
    double s = 0;
    for (double l : losses) s += l;
    return scale * s;
  };
  auto bwd = [&] {
    fwd();
    crossentropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), scale, N, V);
  };
  check_layer("xent", fwd, bwd, {{"logits", &logits, &dlogits}}, /*accumulates=*/false);
  bwd();  // the finite differences left the losses of a perturbed input behind
  EXPECT_EQ(count, 8);
  EXPECT_EQ(losses[3], 0.0);
  for (int v = 0; v < V; v++) EXPECT_EQ(dlogits[size_t(3) * V + v], 0.0);
  // losses against the definition −log(e^{l_y} / Σ e^{l_v})
  for (int n = 0; n < N; n++) {
    if (targets[size_t(n)] < 0) continue;
    double s = 0;
    for (int v = 0; v < V; v++) s += std::exp(logits[size_t(n) * V + v]);
    EXPECT_NEAR(losses[size_t(n)], -std::log(std::exp(logits[size_t(n) * V + targets[size_t(n)]]) / s), 1e-12);
  }
}

TEST(TrainLayers, CrossentropyRejectsBadTargets) {
  std::vector<float> logits(12, 0.0f), losses(3), lse(3);
  std::vector<int> targets = {0, 4, 1};  // V = 4: target 4 is out of range
  EXPECT_ANY_THROW(crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), 3, 4));
}

// --- the float forwards compute what the inference kernels compute ------------------------------

namespace {
std::vector<float> randf(size_t n, uint64_t seed, float scale = 1.0f, float mean = 0.0f) {
  Vec d = randn(n, seed, scale, mean);
  return std::vector<float>(d.begin(), d.end());
}
void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0f, std::abs(b[i])));
  EXPECT_LT(worst, tol) << what;
}
}  // namespace

TEST(TrainLayers, FloatForwardsMatchInferenceKernels) {
  const int n = 6, c = 40, H = 3, HS = 8;
  std::vector<float> x = randf(size_t(n) * c, 30, 1.0f, 0.3f), w = randf(c, 31, 0.2f, 1.0f), b = randf(c, 32, 0.2f);
  std::vector<float> a(x.size()), e(x.size()), s1(n), s2(n);
  rmsnorm_forward(a.data(), s1.data(), x.data(), w.data(), n, c, 1e-5f);
  cpu::rmsnorm(e.data(), x.data(), w.data(), n, c, 1e-5f);
  expect_close(a, e, 1e-6f, "rmsnorm");
  layernorm_forward(a.data(), s1.data(), s2.data(), x.data(), w.data(), b.data(), n, c, 1e-5f);
  cpu::layernorm(e.data(), x.data(), w.data(), b.data(), n, c, 1e-5f);
  expect_close(a, e, 1e-6f, "layernorm");
  swiglu_forward(a.data(), x.data(), e.data(), x.size());
  std::vector<float> e2(x.size());
  cpu::swiglu(e2.data(), x.data(), e.data(), x.size());
  expect_close(a, e2, 1e-6f, "swiglu");
  e = x;
  cpu::gelu_tanh_inplace(e.data(), e.size());
  gelu_forward(a.data(), (float*)nullptr, x.data(), x.size());
  expect_close(a, e, 1e-6f, "gelu");
  std::vector<float> th(x.size());  // keeping the tanh (with AVX-512: the vectorised kernel)
  gelu_forward(a.data(), th.data(), x.data(), x.size());
  expect_close(a, e, 1e-6f, "gelu (kept tanh)");

  // RoPE: one sequence of n tokens at positions 0..n−1, H heads of HS
  std::vector<float> q = randf(size_t(n) * H * HS, 33), rq(q.size()), eq = q;
  rope_forward(rq.data(), q.data(), 1, n, H, HS, 10000.0f);
  for (int t = 0; t < n; t++) cpu::rope(eq.data() + size_t(t) * H * HS, H, HS, t, 10000.0f);
  expect_close(rq, eq, 1e-6f, "rope");

  // attention (GQA 4/2) on one sequence against cpu::attention over a cache of the same rows
  const int NH = 4, NKV = 2;
  std::vector<float> qq = randf(size_t(n) * NH * HS, 34), k = randf(size_t(n) * NKV * HS, 35),
                     v = randf(size_t(n) * NKV * HS, 36), out(qq.size()), eout(qq.size()), att(size_t(NH) * n * n);
  attention_forward(out.data(), att.data(), qq.data(), k.data(), v.data(), 1, n, NH, NKV, HS);
  cpu::attention(eout.data(), qq.data(), k.data(), v.data(), n, 0, NH, NKV, cpu::KvLayout::rows(NKV * HS, HS));
  expect_close(out, eout, 1e-6f, "attention");
  // every probability row sums to 1 and is 0 in the future
  for (int h = 0; h < NH; h++)
    for (int t = 0; t < n; t++) {
      float s = 0;
      for (int u = 0; u < n; u++) {
        const float p = att[(size_t(h) * n + t) * n + u];
        if (u > t) {
          EXPECT_EQ(p, 0.0f);
        }
        s += p;
      }
      EXPECT_NEAR(s, 1.0f, 1e-6f);
    }
}

// The float matmul (cpu::matmul forward, train_kernels backward) against the double reference.
TEST(TrainLayers, FloatMatmulMatchesDouble) {
  const int n = 7, IC = 33, OC = 21;
  Vec xd = randn(size_t(n) * IC, 37), Wd = randn(size_t(OC) * IC, 38), bd = randn(OC, 39), rd = randn(size_t(n) * OC, 40);
  std::vector<float> x(xd.begin(), xd.end()), W(Wd.begin(), Wd.end()), b(bd.begin(), bd.end()), r(rd.begin(), rd.end());
  Vec outd(size_t(n) * OC), dxd(xd.size()), dWd(Wd.size()), dbd(OC);
  std::vector<float> out(outd.size()), dx(x.size()), dW(W.size()), db(OC);
  matmul_forward(outd.data(), xd.data(), Wd.data(), bd.data(), n, IC, OC);
  matmul_forward(out.data(), x.data(), W.data(), b.data(), n, IC, OC);
  matmul_backward(dxd.data(), dWd.data(), dbd.data(), rd.data(), xd.data(), Wd.data(), n, IC, OC);
  matmul_backward(dx.data(), dW.data(), db.data(), r.data(), x.data(), W.data(), n, IC, OC);
  auto check = [](const std::vector<float>& f, const Vec& d, const char* what) {
    double worst = 0;
    for (size_t i = 0; i < f.size(); i++) worst = std::max(worst, std::abs(f[i] - d[i]) / std::max(1.0, std::abs(d[i])));
    EXPECT_LT(worst, 1e-5) << what;
  };
  check(out, outd, "out"), check(dx, dxd, "dx"), check(dW, dWd, "dW"), check(db, dbd, "db");
}
