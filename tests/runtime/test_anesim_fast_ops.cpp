// anesim's vectorised fp16 conversions and elementwise ops give exactly the bits of the scalar
// definitions (base/dtype.h's conversions, the interpreter's eval_op then rounding) on every
// instruction set and thread count — NaNs, infinities, subnormals, overflow and broadcasting
// included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "anesim_test_util.h"
#include "base/dtype.h"
#include "runtime/anesim/anesim_fast_ops.h"
#include "runtime/fp16_span.h"
#include "runtime/anesim/anesim_plan.h"
#include "runtime/cpu/kernels.h"

namespace orion::runtime::anesim {
namespace {

using ir::ElemType;
using ir::Op;
using ir::Tensor32;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// fp32 values that exercise the conversion: random bit patterns (all exponents, NaNs with
// payloads among them), the fp16 boundaries (largest finite, the overflow threshold 65520, the
// subnormals and half the smallest), ties, zeros and infinities. Long enough to be split over
// threads, and not a multiple of any vector width (tails).
std::vector<float> awkward_floats() {
  std::vector<float> v = {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 1e-8f, 2.98e-8f, 5.96e-8f,
                          6.1e-5f, -6.1e-5f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                          from_bits(0x7f800001u), from_bits(0xffc12345u), from_bits(0x00000001u)};
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 3.0f);
  for (int i = 0; i < 70001; i++) v.push_back(i % 3 ? n(rng) : from_bits(uint32_t(rng())));
  return v;
}

TEST(anesim_FastOps, Fp16ConversionsMatchTheScalarFunctionsBitForBit) {
  const std::vector<float> f = awkward_floats();
  std::vector<uint16_t> every_half(65536 + 7);  // every fp16 bit pattern (and a tail)
  for (size_t i = 0; i < every_half.size(); i++) every_half[i] = uint16_t(i);
  test::on_every_path([&](const std::string& path) {
    SCOPED_TRACE(path);
    std::vector<float> rounded = f, widened(every_half.size());
    std::vector<uint16_t> narrowed(f.size());
    round_fp16_span(rounded.data(), int64_t(rounded.size()));
    f32_to_f16_span(narrowed.data(), f.data(), int64_t(f.size()));
    f16_to_f32_span(widened.data(), every_half.data(), int64_t(every_half.size()));
    for (size_t i = 0; i < f.size(); i++) {
      ASSERT_EQ(bits(rounded[i]), bits(f16_to_f32(f32_to_f16(f[i])))) << "round " << i << " of " << f[i];
      ASSERT_EQ(narrowed[i], f32_to_f16(f[i])) << "narrow " << i << " of " << f[i];
    }
    for (size_t i = 0; i < every_half.size(); i++)
      ASSERT_EQ(bits(widened[i]), bits(f16_to_f32(every_half[i]))) << "widen 0x" << std::hex << every_half[i];
  });
}

// eval_op's result, rounded to fp16 when the type says so: what anesim computed before.
Tensor32 reference(Op op, const std::vector<const Tensor32*>& in, const ir::Type& result, const ir::Attrs& attrs = {}) {
  Tensor32 want = ir::eval_op(op, in, attrs, {result}, "ref")[0];
  if (result.elem == ElemType::F16) round_fp16(want);
  return want;
}

void expect_same_bits(const Tensor32& got, const Tensor32& want, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  for (size_t i = 0; i < want.data.size(); i++)
    ASSERT_EQ(bits(got.data[i]), bits(want.data[i])) << what << " element " << i;
}

TEST(anesim_FastOps, BinaryOpsWithBroadcastingMatchTheInterpreter) {
  // Operand shapes against [2, 3, 5, 37]: full, per-channel, per-column, scalar, outer-only,
  // lower rank and interleaved broadcast axes; and a big one that is split over threads.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 3, 5, 37}, {2, 3, 5, 37}}, {{2, 3, 5, 37}, {1, 3, 1, 1}}, {{1, 1, 1, 37}, {2, 3, 5, 37}},
      {{2, 3, 5, 37}, {1}},           {{2, 1, 5, 1}, {1, 3, 1, 37}}, {{5, 37}, {2, 3, 1, 37}},
      {{2, 3, 5, 1}, {2, 3, 5, 37}},  {{1, 768, 1, 256}, {1, 768, 1, 1}}};
  test::on_every_path([&](const std::string& path) {
    uint32_t seed = 30;
    for (const auto& [sa, sb] : cases) {
      std::vector<int64_t> out(std::max(sa.size(), sb.size()), 1);
      for (size_t i = 0; i < out.size(); i++) {
        const size_t ia = out.size() - sa.size(), ib = out.size() - sb.size();
        out[i] = std::max(i >= ia ? sa[i - ia] : 1, i >= ib ? sb[i - ib] : 1);
      }
      const Tensor32 a = test::random_t(sa, seed++, 40.0f), b = test::random_t(sb, seed++, 40.0f);
      for (Op op : {Op::Add, Op::Sub, Op::Mul})
        for (ElemType t : {ElemType::F16, ElemType::F32}) {
          const ir::Type type{t, out};
          Tensor32 got;
          ASSERT_TRUE(eval_fast_op(op, {&a, &b}, {}, type, "t", got));
          expect_same_bits(got, reference(op, {&a, &b}, type),
                           fmt::format("{} {} {}: [{}] ∘ [{}]", path, ir::op_info(op).name, ir::elem_name(t),
                                       fmt::join(sa, ","), fmt::join(sb, ",")));
        }
    }
  });
}

TEST(anesim_FastOps, UnaryOpsMatchTheInterpreter) {
  Tensor32 x = test::random_t({1, 64, 1, 1100}, 40, 6.0f);  // > 2¹⁵ elements: threads share it
  x.data[0] = -0.0f, x.data[1] = std::numeric_limits<float>::infinity(), x.data[2] = -12.0f, x.data[3] = 11.5f;
  test::on_every_path([&](const std::string& path) {
    for (Op op : {Op::Neg, Op::Relu, Op::Tanh, Op::Sigmoid, Op::Exp, Op::Sqrt, Op::Rsqrt, Op::Gelu, Op::Silu})
      for (ElemType t : {ElemType::F16, ElemType::F32}) {
        const ir::Type type{t, x.shape};
        Tensor32 got;
        ASSERT_TRUE(eval_fast_op(op, {&x}, {}, type, "t", got));
        expect_same_bits(got, reference(op, {&x}, type),
                         fmt::format("{} {} {}", path, ir::op_info(op).name, ir::elem_name(t)));
      }
  });
}

TEST(anesim_FastOps, SoftmaxAndReductionsMatchTheInterpreter) {
  // Softmax along the last axis (attention scores, big enough for threads) and a middle one;
  // reductions over the channel axis of [1, C, 1, S] (the ANE layout's norms), the last axis, a
  // block of neighbouring axes, and only size-1 axes.
  Tensor32 scores = test::random_t({1, 12, 64, 64}, 60, 4.0f), mid = test::random_t({2, 7, 3, 5}, 61, 4.0f);
  scores.data[5] = -std::numeric_limits<float>::infinity();  // a masked score
  const Tensor32 act = test::random_t({1, 768, 1, 48}, 62, 3.0f);
  test::on_every_path([&](const std::string& path) {
    for (auto [x, axis] : {std::pair{&scores, int64_t(-1)}, std::pair{&mid, int64_t(1)}}) {
      const ir::Attrs attrs = {{"axis", axis}};
      const ir::Type type{ElemType::F16, x->shape};
      Tensor32 got;
      ASSERT_TRUE(eval_fast_op(Op::Softmax, {x}, attrs, type, "t", got));
      expect_same_bits(got, reference(Op::Softmax, {x}, type, attrs), fmt::format("{} softmax axis {}", path, axis));
    }
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> reductions = {
        {{1}, {1, 1, 1, 48}}, {{-1}, {1, 768, 1, 1}}, {{1, 2}, {1, 1, 1, 48}}, {{0, 2}, {1, 768, 1, 48}}};
    for (const auto& [axes, out] : reductions)
      for (Op op : {Op::ReduceSum, Op::ReduceMean, Op::ReduceMax}) {
        const ir::Attrs attrs = {{"axes", axes}, {"keep_dims", true}};
        const ir::Type type{ElemType::F16, out};
        Tensor32 got;
        ASSERT_TRUE(eval_fast_op(op, {&act}, attrs, type, "t", got));
        expect_same_bits(got, reference(op, {&act}, type, attrs),
                         fmt::format("{} {} axes [{}]", path, ir::op_info(op).name, fmt::join(axes, ",")));
      }
  });
}

TEST(anesim_FastOps, OtherOpsAreLeftToTheInterpreter) {
  const Tensor32 x = test::random_t({2, 4, 3, 8}, 50);
  Tensor32 out;
  EXPECT_FALSE(eval_fast_op(Op::Pow, {&x, &x}, {}, {ElemType::F16, x.shape}, "t", out));
  // Reduced axes that are not neighbours (1 and 3 around a kept 2) take the interpreter's walk.
  EXPECT_FALSE(eval_fast_op(Op::ReduceSum, {&x}, {{"axes", std::vector<int64_t>{1, 3}}}, {ElemType::F16, {2, 1, 3, 1}},
                            "t", out));
  EXPECT_TRUE(out.data.empty());
}

}  // namespace
}  // namespace orion::runtime::anesim
