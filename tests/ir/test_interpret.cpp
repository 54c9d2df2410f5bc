// The reference interpreter, op by op, against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "ir/interpret.h"

namespace orion::ir {
namespace {

using Shape = std::vector<int64_t>;
using Vals = std::vector<float>;

// Builds a graph whose inputs are a, b, ... (fp32 unless told) and whose output is op applied to
// them; runs it and returns the result.
Tensor32 run(Op op, std::vector<Tensor32> ins, Attrs attrs = {}, ElemType t = ElemType::F32, bool round = false,
             int result = 0) {
  Graph g;
  std::vector<Value> vals;
  std::map<std::string, Tensor32> feed;
  for (size_t i = 0; i < ins.size(); i++) {
    std::string name(1, char('a' + i));
    vals.push_back(g.input(name, {t, ins[i].shape}));
    feed[name] = ins[i];
  }
  Value y = g.add_node(op, vals, attrs, "y");
  g.add_output("y", g.results_of(y).at(size_t(result)));
  EXPECT_EQ(g.verify(), "");
  return interpret(g, feed, {round}).at(0);
}

void expect_values(const Tensor32& t, const Shape& shape, const Vals& want, float tol = 1e-6f) {
  EXPECT_EQ(t.shape, shape);
  ASSERT_EQ(t.data.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) EXPECT_NEAR(t.data[i], want[i], tol) << "element " << i;
}

TEST(IrInterpret, Identity) { expect_values(run(Op::Identity, {Tensor32({2}, Vals{1.5f, -2})}), {2}, {1.5f, -2}); }

TEST(IrInterpret, Conv1x1WithAndWithoutBias) {
  // x [1, 2, 1, 3]; W [2, 2, 1, 1] = [[1, 2], [−1, 0.5]]; y[o, s] = Σ_i W[o, i] x[i, s]
  Tensor32 x({1, 2, 1, 3}, Vals{1, 2, 3, 10, 20, 30});
  Tensor32 w({2, 2, 1, 1}, Vals{1, 2, -1, 0.5f});
  expect_values(run(Op::Conv1x1, {x, w}), {1, 2, 1, 3}, {21, 42, 63, 4, 8, 12});
  Tensor32 b({2}, Vals{100, -100});
  expect_values(run(Op::Conv1x1, {x, w, b}), {1, 2, 1, 3}, {121, 142, 163, -96, -92, -88});
}

TEST(IrInterpret, MatmulTransposesAndBroadcastsBatches) {
  Tensor32 a({2, 3}, Vals{1, 2, 3, 4, 5, 6});  // [[1,2,3],[4,5,6]]
  Tensor32 b({3, 2}, Vals{1, 0, 0, 1, 1, 1});  // [[1,0],[0,1],[1,1]]
  expect_values(run(Op::Matmul, {a, b}), {2, 2}, {4, 5, 10, 11});
  // aᵀ·a: [3, 3]
  expect_values(run(Op::Matmul, {a, a}, {{"transpose_x", true}}), {3, 3}, {17, 22, 27, 22, 29, 36, 27, 36, 45});
  // a·aᵀ: [2, 2]
  expect_values(run(Op::Matmul, {a, a}, {{"transpose_y", true}}), {2, 2}, {14, 32, 32, 77});
  // Batch [2, 1] against batch [1]: x [2, 1, 1, 2] · y [1, 2, 1] → [2, 1, 1, 1]
  Tensor32 x({2, 1, 1, 2}, Vals{1, 2, 3, 4});
  Tensor32 y({1, 2, 1}, Vals{10, 1});
  expect_values(run(Op::Matmul, {x, y}), {2, 1, 1, 1}, {12, 34});
  // Both transposed: (xᵀ)(yᵀ) with x [2, 1], y [3, 2] → [1, 3]
  Tensor32 x2({2, 1}, Vals{1, 2});
  Tensor32 y2({3, 2}, Vals{1, 1, 2, 0, 0, 3});
  expect_values(run(Op::Matmul, {x2, y2}, {{"transpose_x", true}, {"transpose_y", true}}), {1, 3}, {3, 2, 6});
}

TEST(IrInterpret, BinaryOpsBroadcastLikeNumpy) {
  Tensor32 a({2, 3}, Vals{1, 2, 3, 4, 5, 6});
  Tensor32 row({3}, Vals{10, 20, 30});
  Tensor32 col({2, 1}, Vals{1, -1});
  expect_values(run(Op::Add, {a, row}), {2, 3}, {11, 22, 33, 14, 25, 36});
  expect_values(run(Op::Sub, {a, col}), {2, 3}, {0, 1, 2, 5, 6, 7});
  expect_values(run(Op::Mul, {col, row}), {2, 3}, {10, 20, 30, -10, -20, -30});
  Tensor32 s({}, Vals{2});
  expect_values(run(Op::Mul, {s, a}), {2, 3}, {2, 4, 6, 8, 10, 12});
  expect_values(run(Op::Pow, {Tensor32({3}, Vals{4, 9, 2}), Tensor32({}, Vals{-0.5f})}), {3},
                {0.5f, 1.0f / 3, 1 / std::sqrt(2.0f)});
  expect_values(run(Op::Pow, {Tensor32({2}, Vals{2, 3}), Tensor32({2}, Vals{3, 2})}), {2}, {8, 9});
}

TEST(IrInterpret, UnaryOps) {
  Tensor32 x({4}, Vals{-2, -0.5f, 0, 1.5f});
  expect_values(run(Op::Neg, {x}), {4}, {2, 0.5f, 0, -1.5f});
  expect_values(run(Op::Relu, {x}), {4}, {0, 0, 0, 1.5f});
  expect_values(run(Op::Tanh, {x}), {4}, {-0.96402758f, -0.46211716f, 0, 0.90514825f});
  expect_values(run(Op::Sigmoid, {x}), {4}, {0.11920292f, 0.37754067f, 0.5f, 0.81757448f});
  expect_values(run(Op::Exp, {x}), {4}, {0.13533528f, 0.60653066f, 1, 4.48168907f}, 1e-5f);
  Tensor32 p({3}, Vals{4, 0.25f, 2});
  expect_values(run(Op::Sqrt, {p}), {3}, {2, 0.5f, 1.41421356f});
  expect_values(run(Op::Rsqrt, {p}), {3}, {0.5f, 2, 0.70710678f});
}

TEST(IrInterpret, Reductions) {
  Tensor32 x({1, 2, 1, 3}, Vals{1, 2, 3, 4, 5, -6});
  expect_values(run(Op::ReduceSum, {x}, {{"axes", Shape{1}}}), {1, 1, 1, 3}, {5, 7, -3});
  expect_values(run(Op::ReduceMean, {x}, {{"axes", Shape{3}}}), {1, 2, 1, 1}, {2, 1});
  expect_values(run(Op::ReduceMax, {x}, {{"axes", Shape{-1}}}), {1, 2, 1, 1}, {3, 5});
  expect_values(run(Op::ReduceMax, {x}, {{"axes", Shape{1, 3}}}), {1, 1, 1, 1}, {5});
  expect_values(run(Op::ReduceSum, {x}, {{"axes", Shape{1}}, {"keep_dims", false}}), {1, 1, 3}, {5, 7, -3});
}

TEST(IrInterpret, SoftmaxAlongAnyAxis) {
  Tensor32 x({2, 2}, Vals{0, std::log(3.0f), 1, 1});
  expect_values(run(Op::Softmax, {x}), {2, 2}, {0.25f, 0.75f, 0.5f, 0.5f});
  // axis 0: columns (0, 1) and (ln 3, 1)
  float e = std::exp(1.0f);
  expect_values(run(Op::Softmax, {x}, {{"axis", int64_t(0)}}), {2, 2}, {1 / (1 + e), 3 / (3 + e), e / (1 + e), e / (3 + e)});
  // Large values do not overflow (the max is subtracted).
  expect_values(run(Op::Softmax, {Tensor32({2}, Vals{1000, 1000})}), {2}, {0.5f, 0.5f});
}

TEST(IrInterpret, ReshapeAndTranspose) {
  Tensor32 x({2, 3}, Vals{1, 2, 3, 4, 5, 6});
  expect_values(run(Op::Reshape, {x}, {{"shape", Shape{3, -1}}}), {3, 2}, {1, 2, 3, 4, 5, 6});
  expect_values(run(Op::Transpose, {x}, {{"perm", Shape{1, 0}}}), {3, 2}, {1, 4, 2, 5, 3, 6});
  // [1, 2, 2, 2] with perm (0, 3, 1, 2): y[0, d, a, b] = x[0, a, b, d]
  Tensor32 z({1, 2, 2, 2}, Vals{0, 1, 2, 3, 4, 5, 6, 7});
  expect_values(run(Op::Transpose, {z}, {{"perm", Shape{0, 3, 1, 2}}}), {1, 2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7});
}

TEST(IrInterpret, SplitSliceAndPad) {
  Tensor32 x({2, 3}, Vals{1, 2, 3, 4, 5, 6});
  Attrs sp{{"axis", int64_t(1)}, {"split_sizes", Shape{1, 2}}};
  expect_values(run(Op::Split, {x}, sp, ElemType::F32, false, 0), {2, 1}, {1, 4});
  expect_values(run(Op::Split, {x}, sp, ElemType::F32, false, 1), {2, 2}, {2, 3, 5, 6});
  expect_values(run(Op::Slice, {x}, {{"begin", Shape{1, 1}}, {"end", Shape{2, 3}}}), {1, 2}, {5, 6});
  expect_values(run(Op::Pad, {x}, {{"pad", Shape{0, 1, 1, 0}}}), {3, 4}, {0, 1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0});
  expect_values(run(Op::Pad, {Tensor32({2}, Vals{1, 2})}, {{"pad", Shape{1, 2}}, {"value", -1.0}}), {5}, {-1, 1, 2, -1, -1});
}

TEST(IrInterpret, Concat) {
  Tensor32 a({2, 1}, Vals{1, 2}), b({2, 2}, Vals{3, 4, 5, 6});
  expect_values(run(Op::Concat, {a, b}, {{"axis", int64_t(1)}}), {2, 3}, {1, 3, 4, 2, 5, 6});
  expect_values(run(Op::Concat, {b, b}, {{"axis", int64_t(0)}}), {4, 2}, {3, 4, 5, 6, 3, 4, 5, 6});
}

TEST(IrInterpret, CastRoundsTruncatesAndTestsNonZero) {
  Tensor32 x({4}, Vals{1.7f, -1.7f, 0, 2049});
  expect_values(run(Op::Cast, {x}, {{"dtype", std::string("int32")}}), {4}, {1, -1, 0, 2049});
  expect_values(run(Op::Cast, {x}, {{"dtype", std::string("bool")}}), {4}, {1, 1, 0, 1});
  // 2049 is not an fp16 value: it rounds to even (2048) only when fp16 rounding is on.
  expect_values(run(Op::Cast, {x}, {{"dtype", std::string("fp16")}}, ElemType::F32, false), {4}, {1.7f, -1.7f, 0, 2049});
  expect_values(run(Op::Cast, {x}, {{"dtype", std::string("fp16")}}, ElemType::F32, true), {4},
                {1.7001953f, -1.7001953f, 0, 2048});
}

TEST(IrInterpret, GeluIsTheTanhFormAndSiluIsXSigmoidX) {
  Tensor32 x({3}, Vals{-1, 0.5f, 2});
  // 0.5x(1 + tanh(0.79788456(x + 0.044715x³)))
  auto g = [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608 * (v + 0.044715 * v * v * v))); };
  expect_values(run(Op::Gelu, {x}), {3}, {float(g(-1)), float(g(0.5)), float(g(2))});
  expect_values(run(Op::Gelu, {x}), {3}, {-0.15880801f, 0.34571401f, 1.95459769f});
  expect_values(run(Op::Silu, {x}), {3}, {-0.26894142f, 0.31122967f, 1.76159416f});
}

TEST(IrInterpret, AttentionWithMaskAndScale) {
  // One head, two queries, two keys, D = 1: q = [1, 2], k = [0, ln 3], v = [10, 20].
  float l3 = std::log(3.0f);
  Tensor32 q({1, 1, 2, 1}, Vals{1, 2}), k({1, 1, 2, 1}, Vals{0, l3}), v({1, 1, 2, 1}, Vals{10, 20});
  // scale 1 (= 1/√1): scores row 0 = [0, ln 3] → p = [1/4, 3/4] → 17.5; row 1 = [0, 2 ln 3] → [1/10, 9/10] → 19
  expect_values(run(Op::Attention, {q, k, v}), {1, 1, 2, 1}, {17.5f, 19}, 1e-5f);
  // Causal mask: query 0 sees only key 0.
  Tensor32 mask({1, 1, 2, 2}, Vals{0, -1e4f, 0, 0});
  expect_values(run(Op::Attention, {q, k, v, mask}), {1, 1, 2, 1}, {10, 19}, 1e-5f);
  // scale 0.5: row 1 scores [0, ln 3] → 17.5
  expect_values(run(Op::Attention, {q, k, v, mask}, {{"scale", 0.5}}), {1, 1, 2, 1}, {10, 17.5f}, 1e-5f);
  // Default scale is 1/√D: D = 4 with q·k = 4·(ln 3)·... use q = k rows of ones → scores = D/√D = 2
  Tensor32 q4({1, 1, 1, 4}, Vals{1, 1, 1, 1}), k4({1, 1, 2, 4}, Vals{0, 0, 0, 0, 1, 1, 1, 1}),
      v4({1, 1, 2, 4}, Vals{0, 0, 0, 0, 1, 1, 1, 1});
  float p1 = std::exp(2.0f) / (1 + std::exp(2.0f));
  expect_values(run(Op::Attention, {q4, k4, v4}), {1, 1, 1, 4}, {p1, p1, p1, p1}, 1e-6f);
}

TEST(IrInterpret, ConstantsOfEveryElementType) {
  Graph g;
  Value h = g.constant_f32("h", {2}, {1.0f / 3, 65504}, ElemType::F16);
  Value f = g.constant_f32("f", {2}, {1.0f / 3, 1e-8f}, ElemType::F32);
  Value i = g.constant_f32("i", {2}, {-7, 123456}, ElemType::I32);
  Value b = g.constant_f32("b", {2}, {0, 5}, ElemType::Bool);
  for (auto [name, v] : {std::pair{"h", h}, {"f", f}, {"i", i}, {"b", b}}) g.add_output(name, v);
  auto out = interpret_named(g, {});
  expect_values(out["h"], {2}, {0.33325195f, 65504});  // nearest fp16 to 1/3
  expect_values(out["f"], {2}, {1.0f / 3, 1e-8f}, 0);
  expect_values(out["i"], {2}, {-7, 123456}, 0);
  expect_values(out["b"], {2}, {0, 1}, 0);
}

TEST(IrInterpret, Fp16RoundingAppliesToFp16TypedResultsOnly) {
  // 1 + 2⁻¹¹ is not an fp16 value: fp16 has 10 fraction bits, so it rounds (to even) to 1.
  Tensor32 one({1}, Vals{1}), eps({1}, Vals{std::ldexp(1.0f, -11)});
  EXPECT_EQ(run(Op::Add, {one, eps}, {}, ElemType::F16, true).data[0], 1.0f);
  EXPECT_EQ(run(Op::Add, {one, eps}, {}, ElemType::F16, false).data[0], 1.0f + std::ldexp(1.0f, -11));
  EXPECT_EQ(run(Op::Add, {one, eps}, {}, ElemType::F32, true).data[0], 1.0f + std::ldexp(1.0f, -11));
  // Overflow goes to infinity in fp16.
  EXPECT_TRUE(
      std::isinf(run(Op::Mul, {Tensor32({1}, Vals{300}), Tensor32({1}, Vals{300})}, {}, ElemType::F16, true).data[0]));
  // Inputs typed fp16 are rounded on the way in.
  EXPECT_EQ(run(Op::Identity, {Tensor32({1}, Vals{2049})}, {}, ElemType::F16, true).data[0], 2048.0f);
  EXPECT_EQ(round_to_fp16(0.1f), 0.0999755859375f);
}

TEST(IrInterpret, ChainsOpsAndChecksInputs) {
  // y = relu(x·2 − 1) through two nodes, and the input checks.
  Graph g;
  Value x = g.input("x", {ElemType::F32, {1, 2, 1, 2}});
  Value two = g.scalar("two", 2, ElemType::F32), one = g.scalar("one", 1, ElemType::F32);
  Value y = g.add_node(Op::Relu, {g.add_node(Op::Sub, {g.add_node(Op::Mul, {x, two}), one})});
  g.add_output("y", y);
  g.add_output("x2", x);
  auto out = interpret(g, {{"x", Tensor32({1, 2, 1, 2}, Vals{0, 1, 2, -3})}});
  ASSERT_EQ(out.size(), 2u);
  expect_values(out[0], {1, 2, 1, 2}, {0, 1, 3, 0});
  expect_values(out[1], {1, 2, 1, 2}, {0, 1, 2, -3});
  EXPECT_THROW(interpret(g, {}), Error);                                     // missing input
  EXPECT_THROW(interpret(g, {{"x", Tensor32({1, 4, 1, 1}, 0.0f)}}), Error);  // wrong shape
}

}  // namespace
}  // namespace orion::ir
