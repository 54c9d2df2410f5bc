// The vector kernels of the training step (runtime/cpu/train_simd.cpp: AVX-512; train_simd_avx2.cpp:
// AVX2) against the portable loops they replace, run on the same inputs by switching the instruction
// set (cpu::set_isa). The kernels tested are those of the ISA this run is on (ctest runs these tests
// with ORION_ISA=avx512 and with ORION_ISA=avx2; on the generic run there is nothing to compare):
//   - AdamW's update and the gradient norm: bit-identical (the same operations in the same order);
//   - GELU: the forward within 3 ulp (the vector tanh), the backward bit-identical given the tanh;
//   - attention forward and backward: equal to float rounding (register-tiled products, vector
//     exp), for MHA and GQA, with and without a sliding window; and AVX2's against AVX-512's (the
//     same products: dV bit-identical given the same probabilities, the rest to the last bits);
//   - the cross-entropy loss and its gradient: equal to float rounding (vector exp, 16- or 8-lane sums);
//   - SwiGLU forward and backward: within float rounding (the vector exp);
// and every one the same bits with 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_kernels.h"
#include "train/loop/adamw.h"
#include "train/cpu/layers.h"

using namespace orion;
using namespace orion::train;

namespace {

std::vector<float> randf(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The largest |a − b| relative to the largest |b|.
float rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0, m = 0;
  for (size_t i = 0; i < a.size(); i++) d = std::max(d, std::abs(a[i] - b[i])), m = std::max(m, std::abs(b[i]));
  return m > 0 ? d / m : d;
}

// Runs fn with the portable loops (generic ISA) and with the vector kernels of this run's ISA
// (AVX-512 or AVX2), restoring the ISA after.
class TrainSimd : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = simd_ = cpu::active_isa();
    if (simd_ == cpu::Isa::Generic) GTEST_SKIP() << "the portable path: no vector kernels to compare with it";
    ASSERT_TRUE(cpu::train_simd_available());
  }
  void TearDown() override {
    cpu::set_isa(saved_);
    cpu::set_num_threads(0);
  }
  template <typename Fn>
  void portable(Fn&& fn) {
    cpu::set_isa(cpu::Isa::Generic);
    ASSERT_FALSE(cpu::train_simd_available());
    fn();
    cpu::set_isa(simd_);
  }
  // run(threads)'s result with the portable loops (2 threads), and with the vector kernels on 2 and
  // on 1 thread.
  template <typename Run>
  auto three_runs(Run&& run) {
    decltype(run(2)) generic;
    portable([&] { generic = run(2); });
    auto simd2 = run(2);
    auto simd1 = run(1);
    return std::tuple{generic, simd2, simd1};
  }
  cpu::Isa saved_ = cpu::Isa::Generic, simd_ = cpu::Isa::Generic;
};

ModelConfig small_gpt2() {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.dim = 64, c.hidden_dim = 256, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4;
  c.vocab_size = 1000, c.padded_vocab = 1024, c.seq_len = 16;  // tok_emb spans several 16K chunks
  return c;
}

}  // namespace

TEST_F(TrainSimd, AdamWBitIdenticalToPortable) {
  const ModelConfig c = small_gpt2();
  auto run = [&](int threads) {
    cpu::set_num_threads(threads);
    ParamBuffer p(c), g(c);
    std::vector<float> init = randf(p.size(), 1, 0.1f);
    std::copy(init.begin(), init.end(), p.data());
    AdamW opt(p, {.weight_decay = 0.1f, .clip_norm = 1.0f});
    std::vector<double> norms;  // the sum of squares' bits (a float would round reorderings away)
    for (int step = 0; step < 3; step++) {
      std::vector<float> gr = randf(g.size(), 10 + step, 0.5f);
      std::copy(gr.begin(), gr.end(), g.data());
      norms.push_back(opt.norm(g.data()));
      opt.step(p, g, 1e-3f, norms.back());
    }
    std::vector<float> out(p.data(), p.data() + p.size());
    out.insert(out.end(), opt.m().begin(), opt.m().end());
    out.insert(out.end(), opt.v().begin(), opt.v().end());
    return std::pair{out, norms};
  };
  const auto [generic, simd2, simd1] = three_runs(run);
  EXPECT_TRUE(same_bits(simd2.first, generic.first)) << "largest relative difference " << rel_diff(simd2.first, generic.first);
  EXPECT_EQ(simd2.second, generic.second);  // the norms, to the last bit
  EXPECT_TRUE(same_bits(simd1.first, simd2.first));
  EXPECT_EQ(simd1.second, simd2.second);
  EXPECT_GT(rel_diff(std::vector<float>(simd2.first.begin(), simd2.first.begin() + 100), randf(100, 1, 0.1f)), 0.0f)
      << "the parameters moved";
}

TEST_F(TrainSimd, GradientNormBitIdenticalToPortable) {
  // Magnitudes from 2^−20 to 2^20, so that adding the squares in another order changes the sum's
  // last bits; buffers of whole and partial vectors, several chunks, and starts off alignment.
  const size_t n = 70001;
  std::vector<float> g = randf(n, 12);
  for (size_t i = 0; i < n; i++) g[i] = std::ldexp(g[i], int(i * 7919 % 41) - 20);
  auto run = [&](int threads) {
    cpu::set_num_threads(threads);
    std::vector<double> norms;
    for (size_t size : {1, 7, 8, 9, 23, 1000, 16389, 70000})
      for (size_t start : {0, 1})
        norms.push_back(AdamW({{0, size}}, size, {}).norm(g.data() + start));
    return norms;
  };
  const auto [generic, simd2, simd1] = three_runs(run);
  EXPECT_EQ(simd2, generic);
  EXPECT_EQ(simd1, simd2);
}

TEST_F(TrainSimd, GeluMatchesPortable) {
  const size_t n = 100003;  // several blocks and a partial vector at the end
  const std::vector<float> x = randf(n, 2, 2.0f), dy = randf(n, 3);
  struct Out {
    std::vector<float> y, th, dx;
  };
  auto run = [&](int threads) {
    cpu::set_num_threads(threads);
    Out o{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n, 0.25f)};  // dx accumulates
    gelu_forward(o.y.data(), o.th.data(), x.data(), n);
    gelu_backward(o.dx.data(), dy.data(), x.data(), o.th.data(), n);
    return o;
  };
  const auto [generic, simd, simd1] = three_runs(run);
  EXPECT_LT(rel_diff(simd.th, generic.th), 1e-6f);
  EXPECT_LT(rel_diff(simd.y, generic.y), 1e-6f);
  EXPECT_TRUE(same_bits(simd.y, simd1.y) && same_bits(simd.dx, simd1.dx));
  // Given the same tanh, the backward is the portable loop's arithmetic exactly.
  std::vector<float> dx(n, 0.25f);
  const float* th = simd.th.data();  // (lambdas capture no structured bindings in clang 14)
  portable([&] { gelu_backward(dx.data(), dy.data(), x.data(), th, n); });
  EXPECT_TRUE(same_bits(simd.dx, dx)) << "largest relative difference " << rel_diff(simd.dx, dx);
}

TEST_F(TrainSimd, AttentionMatchesPortable) {
  ASSERT_TRUE(cpu::attention_simd_available(16));
  const int B = 2, T = 37;
  // (head sizes of 1 … 4 vectors of 16, two tiles of columns, a ragged 40 and 20 (a partial last
  // vector of 8 lanes too); T = 37 leaves a partial tile of rows; a sliding window in the forward)
  for (auto heads : {std::tuple{4, 4, 64, 0}, std::tuple{4, 2, 32, 0}, std::tuple{2, 1, 16, 5}, std::tuple{2, 2, 48, 0},
                     std::tuple{2, 1, 128, 0}, std::tuple{3, 1, 40, 5}, std::tuple{2, 1, 20, 3}}) {
    const int NH = std::get<0>(heads), NKV = std::get<1>(heads), HS = std::get<2>(heads);  // captured below
    const int window = std::get<3>(heads);
    const size_t N = size_t(B) * T, Q = size_t(NH) * HS, KV = size_t(NKV) * HS;
    const std::vector<float> q = randf(N * Q, 4), k = randf(N * KV, 5), v = randf(N * KV, 6), dout = randf(N * Q, 7);
    struct Out {
      std::vector<float> out, att, dq, dk, dv;
    };
    auto run = [&](int threads) {
      cpu::set_num_threads(threads);
      Out o{std::vector<float>(N * Q), std::vector<float>(size_t(B) * NH * T * T), std::vector<float>(N * Q, 0.5f),
            std::vector<float>(N * KV, 0.5f), std::vector<float>(N * KV, 0.5f)};  // gradients accumulate
      attention_forward(o.out.data(), o.att.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HS, window);
      attention_backward(o.dq.data(), o.dk.data(), o.dv.data(), dout.data(), o.att.data(), q.data(), k.data(), v.data(), B,
                         T, NH, NKV, HS);
      return o;
    };
    const auto [generic, simd, simd1] = three_runs(run);
    const std::string what = std::to_string(NH) + "/" + std::to_string(NKV) + " heads of " + std::to_string(HS) +
                             ", window " + std::to_string(window);
    EXPECT_LT(rel_diff(simd.out, generic.out), 1e-5f) << what;
    EXPECT_LT(rel_diff(simd.att, generic.att), 1e-5f) << what;
    EXPECT_LT(rel_diff(simd.dq, generic.dq), 1e-5f) << what;
    EXPECT_LT(rel_diff(simd.dk, generic.dk), 1e-5f) << what;
    EXPECT_LT(rel_diff(simd.dv, generic.dv), 1e-5f) << what;
    EXPECT_TRUE(same_bits(simd.out, simd1.out) && same_bits(simd.dq, simd1.dq) && same_bits(simd.dk, simd1.dk) &&
                same_bits(simd.dv, simd1.dv))
        << what;
  }
}

// The AVX2 attention kernels against the AVX-512 ones (train_attention_simd.cpp): every product is
// the same FMA chain in both, only the softmax rows' sums (8 lanes against 16) and libmvec's e^x
// variant differ. So the forward's P and O, and dQ, dK (through dS), agree to the last bits, and dV =
// Pᵀ·dO, given the same P, is the same bits. Runs on every ISA of this run, needs an AVX-512 CPU.
TEST(TrainAttention, Avx2MatchesAvx512) {
  const cpu::Isa saved = cpu::active_isa();
  if (!cpu::set_isa(cpu::Isa::Avx512)) GTEST_SKIP() << "this CPU has no AVX-512: nothing to compare AVX2 with";
  struct Restore {
    cpu::Isa isa;
    ~Restore() { cpu::set_isa(isa), cpu::set_num_threads(0); }
  } restore{saved};
  const int B = 2, T = 37;
  for (auto heads : {std::tuple{4, 4, 64, 0}, std::tuple{4, 2, 32, 0}, std::tuple{2, 1, 16, 5}, std::tuple{2, 1, 128, 0},
                     std::tuple{3, 1, 40, 5}, std::tuple{2, 1, 20, 3}}) {
    const int NH = std::get<0>(heads), NKV = std::get<1>(heads), HS = std::get<2>(heads), window = std::get<3>(heads);
    const size_t N = size_t(B) * T, Q = size_t(NH) * HS, KV = size_t(NKV) * HS, A = size_t(B) * NH * T * T;
    const std::vector<float> q = randf(N * Q, 14), k = randf(N * KV, 15), v = randf(N * KV, 16), dout = randf(N * Q, 17);
    struct Out {
      std::vector<float> out, att, dq, dk, dv;
    };
    // The forward, then the backward from the probabilities p (both ISAs get the same ones).
    auto run = [&](cpu::Isa isa, const std::vector<float>* p) {
      EXPECT_TRUE(cpu::set_isa(isa));
      EXPECT_TRUE(cpu::attention_simd_available(HS));
      cpu::set_num_threads(2);
      Out o{std::vector<float>(N * Q), std::vector<float>(A), std::vector<float>(N * Q, 0.5f),
            std::vector<float>(N * KV, 0.5f), std::vector<float>(N * KV, 0.5f)};
      attention_forward(o.out.data(), o.att.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HS, window);
      attention_backward(o.dq.data(), o.dk.data(), o.dv.data(), dout.data(), (p ? *p : o.att).data(), q.data(), k.data(),
                         v.data(), B, T, NH, NKV, HS);
      return o;
    };
    const Out wide = run(cpu::Isa::Avx512, nullptr);
    const Out narrow = run(cpu::Isa::Avx2, &wide.att);
    const std::string what = std::to_string(NH) + "/" + std::to_string(NKV) + " heads of " + std::to_string(HS) +
                             ", window " + std::to_string(window);
    EXPECT_LT(rel_diff(narrow.att, wide.att), 1e-6f) << what;
    EXPECT_LT(rel_diff(narrow.out, wide.out), 1e-6f) << what;
    EXPECT_LT(rel_diff(narrow.dq, wide.dq), 1e-6f) << what;
    EXPECT_LT(rel_diff(narrow.dk, wide.dk), 1e-6f) << what;
    EXPECT_TRUE(same_bits(narrow.dv, wide.dv)) << what << ": largest relative difference " << rel_diff(narrow.dv, wide.dv);
  }
}

TEST_F(TrainSimd, CrossEntropyMatchesPortable) {
  const int N = 6, V = 1003;  // a partial vector at the end of every row
  const std::vector<float> logits = randf(size_t(N) * V, 8, 3.0f);
  const std::vector<int> targets = {5, 1002, -1, 0, 517, 64};
  struct Out {
    std::vector<float> losses, lse, dlogits;
    int count;
  };
  auto run = [&](int threads) {
    cpu::set_num_threads(threads);
    Out o{std::vector<float>(N), std::vector<float>(N), logits, 0};
    o.count = crossentropy_forward(o.losses.data(), o.lse.data(), logits.data(), targets.data(), N, V);
    crossentropy_backward(o.dlogits.data(), o.dlogits.data(), o.lse.data(), targets.data(), 0.2f, N, V);  // in place
    return o;
  };
  const auto [generic, simd, simd1] = three_runs(run);
  EXPECT_EQ(simd.count, 5);
  EXPECT_EQ(simd.losses[2], 0.0f);
  EXPECT_LT(rel_diff(simd.losses, generic.losses), 1e-6f);
  EXPECT_LT(rel_diff(simd.lse, generic.lse), 1e-6f);
  EXPECT_LT(rel_diff(simd.dlogits, generic.dlogits), 1e-6f);
  EXPECT_TRUE(same_bits(simd.losses, simd1.losses) && same_bits(simd.dlogits, simd1.dlogits));
}

TEST_F(TrainSimd, SwigluMatchesPortable) {
  const size_t n = 50001;
  const std::vector<float> g = randf(n, 9, 3.0f), u = randf(n, 10), dy = randf(n, 11);
  struct Out {
    std::vector<float> y, dg, du;
  };
  auto run = [&](int threads) {
    cpu::set_num_threads(threads);
    Out o{std::vector<float>(n), std::vector<float>(n, 0.25f), std::vector<float>(n, -0.5f)};  // accumulate
    swiglu_forward(o.y.data(), g.data(), u.data(), n);
    swiglu_backward(o.dg.data(), o.du.data(), dy.data(), g.data(), u.data(), n);
    return o;
  };
  const auto [generic, simd, simd1] = three_runs(run);
  EXPECT_LT(rel_diff(simd.y, generic.y), 1e-6f);
  EXPECT_LT(rel_diff(simd.dg, generic.dg), 1e-6f);
  EXPECT_LT(rel_diff(simd.du, generic.du), 1e-6f);
  EXPECT_TRUE(same_bits(simd.y, simd1.y) && same_bits(simd.dg, simd1.dg) && same_bits(simd.du, simd1.du));
}
