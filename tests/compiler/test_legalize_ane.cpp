// legalize-ane: one test per hardware rule it rewrites (DESIGN.md §2; table in docs/ane-rules.md).
// Every test checks the rewritten structure, Graph::verify() after each run, idempotence (a second
// run reports no change) and, through the IR interpreter, that the rewrite keeps the math (fp32,
// within 1e-5).
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/passes/passes.h"
#include "compiler/passes/legalize_ane.h"
#include "ir/interpret.h"

namespace orion::compiler {
namespace {

using namespace ir;

const ChipProfile& m1() { return chip_profile("m1"); }
const ChipProfile& m4() { return chip_profile("m4"); }

int count_ops(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += !node.dead && node.op == op;
  return n;
}

const Node& output_node(const Graph& g, const std::string& out) {
  for (const GraphOutput& o : g.outputs())
    if (o.name == out) return g.node(o.value);
  ADD_FAILURE() << "no output " << out;
  return g.node(0);
}

float scalar_value(const Graph& g, Value v) {
  const Node& n = g.node(v);
  EXPECT_EQ(n.op, Op::Const) << n.name;
  EXPECT_TRUE(n.results[0].shape.empty()) << n.name;
  return const_values(n).data.at(0);
}

// Runs legalize-ane on g twice: the first run must report `expect_change`, the second no change
// (idempotence); the graph verifies after each.
PassContext legalize(Graph& g, const ChipProfile& chip = m4(), bool expect_change = true) {
  PassContext ctx;
  ctx.chip = &chip;
  auto pass = make_legalize_ane_pass();
  EXPECT_STREQ(pass->name(), "legalize-ane");
  EXPECT_EQ(pass->run(g, ctx), expect_change);
  EXPECT_EQ(g.verify(), "");
  EXPECT_FALSE(pass->run(g, ctx)) << "second run changed the graph: legalize-ane is not idempotent";
  EXPECT_EQ(g.verify(), "");
  return ctx;
}

// Deterministic values in [lo, hi] for every input of g.
std::map<std::string, Tensor32> inputs_for(const Graph& g, float lo = -3.0f, float hi = 3.0f) {
  std::map<std::string, Tensor32> in;
  uint32_t state = 12345;
  for (int i : g.input_nodes()) {
    Tensor32 t(g.node(i).results[0].shape);
    for (float& v : t.data) {
      state = state * 1664525u + 1013904223u;
      v = lo + (hi - lo) * float(state >> 8) / float(1u << 24);
    }
    in[g.node(i).name] = std::move(t);
  }
  return in;
}

void expect_close(const Tensor32& want, const Tensor32& got, const std::string& what, float tol = 1e-5f) {
  ASSERT_EQ(want.shape, got.shape) << what;
  int bad = 0;
  for (size_t i = 0; i < want.data.size() && bad < 5; i++)
    if (!(std::fabs(want.data[i] - got.data[i]) <= tol * std::max(1.0f, std::fabs(want.data[i]))))
      ADD_FAILURE() << what << "[" << i << "]: " << want.data[i] << " vs " << got.data[i], bad++;
}

// [1, numel/S, 1, S]: how legalize-ane declares a boundary tensor of another shape (C14).
std::vector<int64_t> flat_shape(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return {1, n / s.back(), 1, s.back()};
}

// The original and the legalized graph compute the same outputs within 1e-5. Boundary tensors
// flattened to [1, C, 1, S] (C14) hold the same bytes: inputs are passed in the declared shape and
// outputs compared element by element after checking the shape is the original or its flat form.
void expect_same_math(const Graph& before, const Graph& after, const std::map<std::string, Tensor32>& in) {
  std::map<std::string, Tensor32> in_after = in;
  for (int i : after.input_nodes()) {
    Tensor32& t = in_after[after.node(i).name];
    if (t.numel() == after.node(i).results[0].numel()) t.shape = after.node(i).results[0].shape;
  }
  auto want = interpret_named(before, in), got = interpret_named(after, in_after);
  for (auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << "legalized graph lost output " << name;
    Tensor32 g = got[name];
    if (g.shape != t.shape && t.shape.size() && g.shape == flat_shape(t.shape)) g.shape = t.shape;
    expect_close(t, g, name);
  }
}

// v's producer, looking through a reshape legalize-ane put at the boundary (C14).
Value through_reshape(const Graph& g, Value v) { return g.node(v).op == Op::Reshape ? g.node(v).inputs[0] : v; }

Value weight(Graph& g, const std::string& name, std::vector<int64_t> shape, ElemType t = ElemType::F32,
             float scale = 0.02f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); i++) v[i] = scale * float(int64_t(i * 7919 % 201) - 100) / 100.0f;
  return g.constant_f32(name, std::move(shape), v, t);
}

// An fp32 [1, 768, 1, 16] input: 49,152 bytes, exactly the minimum buffer, so no padding happens.
const Type kX{ElemType::F32, {1, 768, 1, 16}};

TEST(LegalizeAne, C2_GeluBecomesTanhForm) {
  Graph g;
  Value x = g.input("x", kX);
  g.add_output("y", g.add_node(Op::Gelu, {x}, {}, "act"));
  const Graph before = g;
  legalize(g);
  EXPECT_EQ(count_ops(g, Op::Gelu), 0);
  EXPECT_EQ(count_ops(g, Op::Tanh), 1);
  EXPECT_EQ(count_ops(g, Op::Mul), 6);  // x·x, ·x, ·0.044715, ·0.79788456, 0.5·x, final product
  EXPECT_EQ(count_ops(g, Op::Add), 2);  // x + 0.044715x³, 1 + tanh
  const Node& y = output_node(g, "y");
  EXPECT_EQ(y.op, Op::Mul);
  EXPECT_EQ(y.name, "act_gelu");
  std::vector<float> scalars;
  for (const Node& n : g.nodes())
    if (n.op == Op::Const) scalars.push_back(const_values(n).data[0]);
  std::sort(scalars.begin(), scalars.end());
  EXPECT_EQ(scalars, (std::vector<float>{0.044715f, 0.5f, 0.79788456f, 1.0f}));
  expect_same_math(before, g, inputs_for(before));
}

TEST(LegalizeAne, C2_SiluBecomesXTimesSigmoid) {
  Graph g;
  Value x = g.input("x", kX);
  g.add_output("y", g.add_node(Op::Silu, {x}, {}, "act"));
  const Graph before = g;
  legalize(g);
  EXPECT_EQ(count_ops(g, Op::Silu), 0);
  const Node& y = output_node(g, "y");
  ASSERT_EQ(y.op, Op::Mul);
  EXPECT_EQ(y.inputs[0], x);
  EXPECT_EQ(g.node(y.inputs[1]).op, Op::Sigmoid);
  EXPECT_EQ(g.node(y.inputs[1]).inputs[0], x);
  expect_same_math(before, g, inputs_for(before));
}

TEST(LegalizeAne, C2_RepeatedExpansionsShareScalarSlots) {
  // Two gelus need the same four scalars: C16 counts each constant once, so they are shared.
  Graph g;
  Value x = g.input("x", kX);
  Value a = g.add_node(Op::Gelu, {x}, {}, "a");
  g.add_output("y", g.add_node(Op::Gelu, {a}, {}, "b"));
  const Graph before = g;
  legalize(g);
  EXPECT_EQ(count_ops(g, Op::Const), 4);
  EXPECT_EQ(count_ops(g, Op::Tanh), 2);
  expect_same_math(before, g, inputs_for(before));
}

TEST(LegalizeAne, MilHasNoNeg_NegBecomesMulByMinusOne) {
  Graph g;
  Value x = g.input("x", kX);
  g.add_output("y", g.add_node(Op::Neg, {x}, {}, "n"));
  const Graph before = g;
  legalize(g);
  EXPECT_EQ(count_ops(g, Op::Neg), 0);
  const Node& y = output_node(g, "y");
  ASSERT_EQ(y.op, Op::Mul);
  EXPECT_EQ(y.inputs[0], x);
  EXPECT_EQ(scalar_value(g, y.inputs[1]), -1.0f);
  expect_same_math(before, g, inputs_for(before));
}

TEST(LegalizeAne, C4_ConvBiasBecomesAddOfChannelConstant) {
  Graph g;
  Value x = g.input("x", kX);
  Value w = weight(g, "w", {256, 768, 1, 1});
  Value b = weight(g, "b", {256}, ElemType::F32, 1.0f);
  g.add_output("y", g.add_node(Op::Conv1x1, {x, w, b}, {}, "proj"));
  const Graph before = g;
  legalize(g);
  const Node& y = output_node(g, "y");
  ASSERT_EQ(y.op, Op::Add);
  const Node& conv = g.node(y.inputs[0]);
  EXPECT_EQ(conv.op, Op::Conv1x1);
  EXPECT_EQ(conv.inputs.size(), 2u);
  const Node& bias = g.node(y.inputs[1]);
  EXPECT_EQ(bias.op, Op::Const);
  EXPECT_EQ(bias.results[0].shape, (std::vector<int64_t>{1, 256, 1, 1}));
  EXPECT_EQ(g.find("b"), -1) << "the old [256] bias constant should be gone";
  for (const Node& n : g.nodes()) EXPECT_FALSE(n.op == Op::Conv1x1 && n.inputs.size() == 3) << n.name;
  expect_same_math(before, g, inputs_for(before));
}

TEST(LegalizeAne, C4_ComputedBiasIsReshaped) {
  Graph g;
  Value x = g.input("x", kX);
  Value w = weight(g, "w", {256, 768, 1, 1});
  Value b = g.add_node(Op::Mul, {weight(g, "b", {256}, ElemType::F32, 1.0f), g.scalar("two", 2.0, ElemType::F32)}, {}, "b2");
  g.add_output("y", g.add_node(Op::Conv1x1, {x, w, b}, {}, "proj"));
  const Graph before = g;
  legalize(g);
  const Node& y = output_node(g, "y");
  ASSERT_EQ(y.op, Op::Add);
  const Node& r = g.node(y.inputs[1]);
  EXPECT_EQ(r.op, Op::Reshape);
  EXPECT_EQ(r.results[0].shape, (std::vector<int64_t>{1, 256, 1, 1}));
  expect_same_math(before, g, inputs_for(before));
}

TEST(LegalizeAne, C17_RsqrtBecomesPowOnChipsWithoutIt) {
  auto build = [] {
    Graph g;
    Value x = g.input("x", kX);
    g.add_output("y", g.add_node(Op::Rsqrt, {x}, {}, "r"));
    return g;
  };
  Graph g = build();
  const Graph before = g;
  ASSERT_FALSE(m1().supports_rsqrt);
  legalize(g, m1());
  EXPECT_EQ(count_ops(g, Op::Rsqrt), 0);
  const Node& y = output_node(g, "y");
  ASSERT_EQ(y.op, Op::Pow);
  EXPECT_EQ(scalar_value(g, y.inputs[1]), -0.5f);
  expect_same_math(before, g, inputs_for(before, 0.1f, 4.0f));

  Graph kept = build();  // M4 runs rsqrt: nothing to do
  legalize(kept, m4(), /*expect_change=*/false);
  EXPECT_EQ(count_ops(kept, Op::Rsqrt), 1);
}

TEST(LegalizeAne, C15_AttentionBecomesExplicitMaskedSoftmax) {
  const int64_t H = 4, S = 32, D = 16;
  Graph g;
  Value q = g.input("q", {ElemType::F32, {1, H, S, D}});
  Value k = g.input("k", {ElemType::F32, {1, H, S, D}});
  Value v = g.input("v", {ElemType::F32, {1, H, S, D}});
  std::vector<float> causal(size_t(S * S));
  for (int64_t i = 0; i < S; i++)
    for (int64_t j = 0; j < S; j++) causal[size_t(i * S + j)] = j > i ? -1e4f : 0.0f;
  Value mask = g.constant_f32("mask", {1, 1, S, S}, causal, ElemType::F32);
  g.add_output("o", g.add_node(Op::Attention, {q, k, v, mask}, {}, "attn"));
  const Graph before = g;
  legalize(g);
  EXPECT_EQ(count_ops(g, Op::Attention), 0);
  const Node& o = g.node(through_reshape(g, g.outputs()[0].value));
  ASSERT_EQ(o.op, Op::Matmul);  // softmax(...) · v
  EXPECT_EQ(through_reshape(g, o.inputs[1]), v);
  const Node& p = g.node(o.inputs[0]);
  ASSERT_EQ(p.op, Op::Softmax);
  EXPECT_EQ(attr_int(p.attrs, "axis", p.name), -1);
  const Node& masked = g.node(p.inputs[0]);
  ASSERT_EQ(masked.op, Op::Add);  // + mask
  EXPECT_EQ(masked.inputs[1], mask);
  const Node& scaled = g.node(masked.inputs[0]);
  ASSERT_EQ(scaled.op, Op::Mul);
  EXPECT_FLOAT_EQ(scalar_value(g, scaled.inputs[1]), 0.25f);  // 1/√16
  const Node& qk = g.node(scaled.inputs[0]);
  ASSERT_EQ(qk.op, Op::Matmul);
  EXPECT_EQ(through_reshape(g, qk.inputs[0]), q);
  EXPECT_EQ(through_reshape(g, qk.inputs[1]), k);
  EXPECT_TRUE(attr_bool(qk.attrs, "transpose_y", qk.name));
  EXPECT_FALSE(attr_bool(qk.attrs, "transpose_x", qk.name));
  expect_same_math(before, g, inputs_for(before));
}

TEST(LegalizeAne, C15_AttentionScaleAttributeIsKept) {
  Graph g;
  Value q = g.input("q", {ElemType::F32, {1, 2, 8, 4}});
  g.add_output("o", g.add_node(Op::Attention, {q, q, q}, {{"scale", 0.3}}, "attn"));
  const Graph before = g;
  legalize(g);
  EXPECT_EQ(count_ops(g, Op::Add), 0);  // no mask
  const Node& p = g.node(g.node(through_reshape(g, g.outputs()[0].value)).inputs[0]);
  EXPECT_FLOAT_EQ(scalar_value(g, g.node(p.inputs[0]).inputs[1]), 0.3f);
  expect_same_math(before, g, inputs_for(before));
}

TEST(LegalizeAne, C1_OutputConcatBecomesSeparateOutputs) {
  Graph g;
  Value x = g.input("x", kX);
  Value a = g.add_node(Op::Relu, {x}, {}, "a");
  Value b = g.add_node(Op::Sigmoid, {x}, {}, "b");
  g.add_output("h", a);
  g.add_output("y", g.add_node(Op::Concat, {a, b}, {{"axis", int64_t(1)}}, "cat"));
  const Graph before = g;
  PassContext ctx = legalize(g);
  EXPECT_EQ(count_ops(g, Op::Concat), 0);
  ASSERT_EQ(g.outputs().size(), 3u);
  EXPECT_EQ(g.outputs()[0].name, "h");
  EXPECT_EQ(g.outputs()[1].name, "y_0");
  EXPECT_EQ(g.outputs()[2].name, "y_1");
  EXPECT_EQ(g.outputs()[1].value, a);
  EXPECT_EQ(g.outputs()[2].value, b);
  ASSERT_EQ(ctx.ane_boundary.output_splits.size(), 1u);
  const OutputSplit& s = ctx.ane_boundary.output_splits[0];
  EXPECT_EQ(s.output, "y");
  EXPECT_EQ(s.axis, 1);
  EXPECT_EQ(s.parts, (std::vector<std::string>{"y_0", "y_1"}));

  // The runtime's reassembly (parts concatenated along the channel axis) gives the original y.
  auto in = inputs_for(before);
  auto want = interpret_named(before, in), got = interpret_named(g, in);
  Tensor32 joined({1, 2 * 768, 1, 16});
  std::copy(got["y_0"].data.begin(), got["y_0"].data.end(), joined.data.begin());
  std::copy(got["y_1"].data.begin(), got["y_1"].data.end(), joined.data.begin() + 768 * 16);
  expect_close(want["y"], joined, "y");
  expect_close(want["h"], got["h"], "h");
}

TEST(LegalizeAne, C1_ConcatInsideTheProgramIsLeftForValidation) {
  Graph g;
  Value x = g.input("x", kX);
  Value c = g.add_node(Op::Concat, {x, x}, {{"axis", int64_t(1)}}, "cat");
  g.add_output("y", g.add_node(Op::Relu, {c}, {}, "r"));
  PassContext ctx = legalize(g, m4(), /*expect_change=*/false);
  EXPECT_EQ(count_ops(g, Op::Concat), 1);
  EXPECT_TRUE(ctx.ane_boundary.output_splits.empty());
}

TEST(LegalizeAne, C14_BoundaryTensorsDeclaredAsC1S) {
  // An attention-probabilities output [1, H, S, S] and a [C, S] input hold the same bytes as
  // [1, H·S, 1, S] and [1, C, 1, S]: declared that way, reshaped inside; the runtime moves nothing.
  const int64_t H = 6, S = 32, C = 768;
  Graph g;
  Value x = g.input("x", {ElemType::F32, {C, S}});
  Value p = g.input("p", {ElemType::F32, {1, H, S, S}});
  Value e = g.add_node(Op::Exp, {p}, {}, "e");
  g.add_output("probs", g.add_node(Op::Softmax, {e}, {{"axis", int64_t(-1)}}, "sm"));
  g.add_output("y", g.add_node(Op::Relu, {x}, {}, "r"));
  const Graph before = g;
  PassContext ctx = legalize(g);
  EXPECT_EQ(g.node(g.find("x")).results[0].shape, (std::vector<int64_t>{1, C, 1, S}));
  EXPECT_EQ(g.node(g.find("p")).results[0].shape, (std::vector<int64_t>{1, H * S, 1, S}));
  const Node& e2 = g.node(g.find("e"));
  EXPECT_EQ(g.node(e2.inputs[0]).op, Op::Reshape);
  EXPECT_EQ(g.node(e2.inputs[0]).results[0].shape, (std::vector<int64_t>{1, H, S, S}));
  const Node& out = output_node(g, "probs");
  EXPECT_EQ(out.op, Op::Reshape);
  EXPECT_EQ(out.results[0].shape, (std::vector<int64_t>{1, H * S, 1, S}));
  EXPECT_EQ(output_node(g, "y").results[0].shape, (std::vector<int64_t>{1, C, 1, S}));
  const BoundaryChange* cp = ctx.ane_boundary.find_change("probs", false);
  ASSERT_TRUE(cp);
  EXPECT_EQ(cp->original.shape, (std::vector<int64_t>{1, H, S, S}));
  EXPECT_EQ(cp->rules, (std::vector<std::string>{"C14"}));
  ASSERT_TRUE(ctx.ane_boundary.find_change("x", true));
  EXPECT_EQ(ctx.ane_boundary.find_change("x", true)->rules, (std::vector<std::string>{"C14"}));
  expect_same_math(before, g, inputs_for(before));
}

TEST(LegalizeAne, C7_SequenceBuckets) {
  // C·S·2 ≥ 49,152: 768 channels need S = 32, 1536 channels S = 16, 64 channels S = 512.
  EXPECT_EQ(ane::sequence_bucket(8, 768 * 2, default_chip()), 32);
  EXPECT_EQ(ane::sequence_bucket(1, 1536 * 2, default_chip()), 16);
  EXPECT_EQ(ane::sequence_bucket(100, 768 * 2, default_chip()), 128);
  EXPECT_EQ(ane::sequence_bucket(3, 64 * 2, default_chip()), 512);
  EXPECT_EQ(ane::sequence_bucket(8, 1 * 2, default_chip()), 0);  // would need S = 32768: beyond the largest bucket
}

TEST(LegalizeAne, C7_SmallInputSequencePaddedToBucket) {
  Graph g;
  Value x = g.input("x", {ElemType::F16, {1, 768, 1, 8}});  // 12,288 bytes < 49,152
  Value r = g.input("r", {ElemType::F16, {1, 768, 1, 8}});
  Value w = weight(g, "w", {768, 768, 1, 1}, ElemType::F16);
  Value bias = weight(g, "bias", {1, 768, 1, 1}, ElemType::F16, 1.0f);
  Value h = g.add_node(Op::Add, {g.add_node(Op::Conv1x1, {x, w}, {}, "proj"), bias}, {}, "biased");
  Value n = g.add_node(Op::ReduceMean, {h}, {{"axes", std::vector<int64_t>{1}}}, "mean");  // over channels
  g.add_output("y", g.add_node(Op::Add, {g.add_node(Op::Sub, {h, n}, {}, "centred"), r}, {}, "res"));
  const Graph before = g;
  PassContext ctx = legalize(g);
  const std::vector<int64_t> padded{1, 768, 1, 32};  // 768·32·2 = 49,152
  EXPECT_EQ(g.node(g.find("x")).results[0].shape, padded);
  EXPECT_EQ(g.node(g.find("r")).results[0].shape, padded);
  EXPECT_EQ(output_node(g, "y").results[0].shape, padded);
  const BoundaryChange* cx = ctx.ane_boundary.find_change("x", true);
  ASSERT_TRUE(cx);
  EXPECT_EQ(cx->original.shape, (std::vector<int64_t>{1, 768, 1, 8}));
  EXPECT_EQ(cx->legalized.shape, padded);
  EXPECT_EQ(cx->rules, (std::vector<std::string>{"C7"}));
  const BoundaryChange* cy = ctx.ane_boundary.find_change("y", false);
  ASSERT_TRUE(cy);
  EXPECT_EQ(cy->original.shape, (std::vector<int64_t>{1, 768, 1, 8}));
  EXPECT_EQ(cy->legalized.shape, padded);
  EXPECT_EQ(ctx.ane_boundary.input_alloc_bytes, 49152);

  // The runtime's side: inputs zero-padded to 32 positions, outputs cut back to 8.
  auto in = inputs_for(before);
  std::map<std::string, Tensor32> in_padded;
  for (auto& [name, t] : in) {
    Tensor32 p({1, 768, 1, 32});
    for (int64_t c = 0; c < 768; c++)
      for (int64_t s = 0; s < 8; s++) p.data[size_t(c * 32 + s)] = t.data[size_t(c * 8 + s)];
    in_padded[name] = std::move(p);
  }
  Tensor32 want = interpret_named(before, in)["y"], got = interpret_named(g, in_padded)["y"], cut({1, 768, 1, 8});
  for (int64_t c = 0; c < 768; c++)
    for (int64_t s = 0; s < 8; s++) cut.data[size_t(c * 8 + s)] = got.data[size_t(c * 32 + s)];
  expect_close(want, cut, "y");
}

TEST(LegalizeAne, C7_SequenceMixingProgramIsNotPadded) {
  // A softmax over the sequence would see the padding: legalize-ane leaves it for validate-ane.
  Graph g;
  Value x = g.input("x", {ElemType::F16, {1, 768, 1, 8}});
  g.add_output("y", g.add_node(Op::Softmax, {x}, {{"axis", int64_t(-1)}}, "sm"));
  PassContext ctx = legalize(g, m4(), /*expect_change=*/false);
  EXPECT_EQ(g.node(g.find("x")).results[0].shape, (std::vector<int64_t>{1, 768, 1, 8}));
  EXPECT_TRUE(ctx.ane_boundary.changes.empty());
}

TEST(LegalizeAne, C5_C13_UniformAllocationSizesRecorded) {
  // Inputs of 49,216 and 65,536 bytes, outputs of 49,216 and 131,072: each group gets its largest,
  // rounded up to the chip's buffer alignment (64 on M4, 128 on M5).
  auto build = [] {
    Graph g;
    Value a = g.input("a", {ElemType::F16, {1, 769, 1, 32}});
    Value b = g.input("b", {ElemType::F16, {1, 1024, 1, 32}});
    g.add_output("ya", g.add_node(Op::Relu, {a}, {}, "ra"));
    g.add_output("yb", g.add_node(Op::Cast, {b}, {{"dtype", std::string("fp32")}}, "cb"));
    return g;
  };
  Graph g4 = build();
  PassContext c4 = legalize(g4, m4(), /*expect_change=*/false);  // the graph itself stays as is
  EXPECT_EQ(c4.ane_boundary.input_alloc_bytes, 65536);
  EXPECT_EQ(c4.ane_boundary.output_alloc_bytes, 131072);
  Graph g5 = build();
  g5.outputs_mut().erase(g5.outputs_mut().begin() + 1);  // only the 49,216-byte output left
  PassContext c5 = legalize(g5, chip_profile("m5"), /*expect_change=*/false);
  EXPECT_EQ(c5.ane_boundary.input_alloc_bytes, 65536);
  EXPECT_EQ(c5.ane_boundary.output_alloc_bytes, 49280);  // 49,216 rounded up to 128
  PassContext c4b = legalize(g5, m4(), /*expect_change=*/false);
  EXPECT_EQ(c4b.ane_boundary.output_alloc_bytes, 49216);  // already a multiple of 64

  // Buffers below the minimum (a program legalize-ane cannot pad) are still allocated with it (C7).
  Graph small;
  Value x = small.input("x", {ElemType::F16, {1, 64, 1, 32}});
  small.add_output("y", small.add_node(Op::Softmax, {x}, {{"axis", int64_t(-1)}}, "sm"));
  PassContext cs = legalize(small, m4(), /*expect_change=*/false);
  EXPECT_EQ(cs.ane_boundary.input_alloc_bytes, 49152);
  EXPECT_EQ(cs.ane_boundary.output_alloc_bytes, 49152);
}

TEST(LegalizeAne, C18_FloatCastsDroppedOnChipsWithoutCast) {
  auto build = [] {
    Graph g;
    Value x = g.input("x", {ElemType::F32, {1, 768, 1, 32}});
    Value h = g.add_node(Op::Cast, {x}, {{"dtype", std::string("fp16")}}, "to16");
    Value w = g.constant_f32("scale", {1, 768, 1, 1}, std::vector<float>(768, 0.5f), ElemType::F16);
    Value r = g.add_node(Op::Mul, {g.add_node(Op::Relu, {h}, {}, "r"), w}, {}, "m");
    g.add_output("y", g.add_node(Op::Cast, {r}, {{"dtype", std::string("fp32")}}, "to32"));
    return g;
  };
  Graph g = build();
  const Graph before = g;
  PassContext ctx = legalize(g, m1());
  EXPECT_EQ(count_ops(g, Op::Cast), 0);
  EXPECT_EQ(g.node(g.find("x")).results[0].elem, ElemType::F16);
  EXPECT_EQ(output_node(g, "y").results[0].elem, ElemType::F16);
  const BoundaryChange* cx = ctx.ane_boundary.find_change("x", true);
  ASSERT_TRUE(cx);
  EXPECT_EQ(cx->original.elem, ElemType::F32);
  EXPECT_EQ(cx->legalized.elem, ElemType::F16);
  EXPECT_EQ(cx->rules, (std::vector<std::string>{"C18"}));
  ASSERT_TRUE(ctx.ane_boundary.find_change("y", false));
  // Same math up to fp16 storage of the input (the interpreter keeps fp32 precision otherwise).
  auto in = inputs_for(before);
  for (float& v : in["x"].data) v = round_to_fp16(v);
  expect_same_math(before, g, in);

  Graph kept = build();  // M4 has cast: nothing to do
  legalize(kept, m4(), /*expect_change=*/false);
  EXPECT_EQ(count_ops(kept, Op::Cast), 2);
}

TEST(LegalizeAne, C18_IntegerCastIsLeftForValidation) {
  Graph g;
  Value x = g.input("x", {ElemType::F16, {1, 768, 1, 32}});
  g.add_output("y", g.add_node(Op::Cast, {x}, {{"dtype", std::string("int32")}}, "toint"));
  legalize(g, m1(), /*expect_change=*/false);
  EXPECT_EQ(count_ops(g, Op::Cast), 1);
}

TEST(LegalizeAne, Gpt2FfnBlockLegalisesInOnePass) {
  // conv+bias → gelu → conv+bias → residual, prefill of 8 tokens: C4 twice, C2, C7.
  Graph g;
  Value x = g.input("x", {ElemType::F16, {1, 768, 1, 8}});
  Value h =
      g.add_node(Op::Conv1x1, {x, weight(g, "w1", {3072, 768, 1, 1}, ElemType::F16), weight(g, "b1", {3072}, ElemType::F16)},
                 {}, "fc");
  h = g.add_node(Op::Gelu, {h}, {}, "act");
  h = g.add_node(Op::Conv1x1, {h, weight(g, "w2", {768, 3072, 1, 1}, ElemType::F16), weight(g, "b2", {768}, ElemType::F16)},
                 {}, "proj");
  g.add_output("y", g.add_node(Op::Add, {x, h}, {}, "res"));
  PassContext ctx = legalize(g);
  EXPECT_EQ(count_ops(g, Op::Gelu), 0);
  for (const Node& n : g.nodes()) EXPECT_FALSE(n.op == Op::Conv1x1 && n.inputs.size() == 3) << n.name;
  EXPECT_EQ(g.node(g.find("x")).results[0].shape, (std::vector<int64_t>{1, 768, 1, 32}));
  EXPECT_TRUE(ctx.diagnostics.empty());
}

}  // namespace
}  // namespace orion::compiler
