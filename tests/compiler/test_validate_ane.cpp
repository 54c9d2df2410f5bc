// validate-ane: one test per hardware rule it rejects (DESIGN.md §2; table in docs/ane-rules.md).
// Each asserts the exact diagnostic (level, rule, node, message), that a program that keeps the
// rule draws no diagnostic, and that the pass never changes the graph.
#include <gtest/gtest.h>

#include "compiler/passes/passes.h"
#include "compiler/pipeline.h"
#include "ir/text.h"

namespace orion::compiler {
namespace {

using namespace ir;

const ChipProfile& m1() { return chip_profile("m1"); }
const ChipProfile& m4() { return chip_profile("m4"); }

// Runs validate-ane on g; checks it reports no change and leaves the graph as it was.
std::vector<Diagnostic> validate(Graph& g, const ChipProfile& chip = m4()) {
  PassContext ctx;
  ctx.chip = &chip;
  const std::string before = print_graph(g);
  auto pass = make_validate_ane_pass();
  EXPECT_STREQ(pass->name(), "validate-ane");
  EXPECT_FALSE(pass->run(g, ctx));
  EXPECT_EQ(print_graph(g), before) << "validate-ane changed the graph";
  for (const Diagnostic& d : ctx.diagnostics) EXPECT_EQ(d.level, Diagnostic::Level::Error) << d.message;
  return ctx.diagnostics;
}

std::vector<Diagnostic> with_rule(const std::vector<Diagnostic>& ds, const std::string& rule) {
  std::vector<Diagnostic> out;
  for (const Diagnostic& d : ds)
    if (d.rule == rule) out.push_back(d);
  return out;
}

std::string describe(const std::vector<Diagnostic>& ds) {
  std::string s;
  for (const Diagnostic& d : ds) s += "[" + d.rule + " at '" + d.node + "'] " + d.message + "\n";
  return s;
}

// Expects exactly one diagnostic, with this rule, node and message.
void expect_one(const std::vector<Diagnostic>& ds, const std::string& rule, const std::string& node,
                const std::string& message) {
  ASSERT_EQ(ds.size(), 1u) << describe(ds);
  EXPECT_EQ(ds[0].rule, rule);
  EXPECT_EQ(ds[0].node, node);
  EXPECT_EQ(ds[0].message, message);
}

const Type kX{ElemType::F16, {1, 768, 1, 32}};  // 49,152 bytes: exactly the minimum buffer

// x → <op> → y, with everything else legal.
Graph unary_program(Op op, const std::string& name, Attrs attrs = {}) {
  Graph g;
  Value x = g.input("x", kX);
  g.add_output("y", g.add_node(op, {x}, std::move(attrs), name));
  return g;
}

Value zeros(Graph& g, const std::string& name, std::vector<int64_t> shape) {
  Type t{ElemType::F16, std::move(shape)};
  auto d = std::make_shared<ConstData>();
  d->bytes.resize(t.bytes());
  return g.constant(name, t, d);
}

TEST(ValidateAne, LegalProgramDrawsNoDiagnostic) {
  Graph g;
  Value x = g.input("x", kX);
  Value y = g.add_node(Op::Conv1x1, {x, zeros(g, "w", {768, 768, 1, 1})}, {}, "proj");
  g.add_output("y", g.add_node(Op::Relu, {y}, {}, "act"));
  EXPECT_EQ(describe(validate(g)), "");
  EXPECT_EQ(describe(validate(g, m1())), "");
}

TEST(ValidateAne, C1_ConcatInsideProgramRejected) {
  Graph g;
  Value x = g.input("x", kX);
  Value c = g.add_node(Op::Concat, {x, x}, {{"axis", int64_t(1)}}, "cat");
  g.add_output("y", g.add_node(Op::Relu, {c}, {}, "act"));
  expect_one(validate(g), "C1", "cat",
             "concat 'cat' is rejected by the ANE compiler (C1); only a concat that feeds nothing but outputs can be "
             "split into outputs");
}

TEST(ValidateAne, C2_LeftoverGeluAndSiluRejected) {
  Graph g = unary_program(Op::Gelu, "act");
  expect_one(validate(g), "C2", "act", "gelu 'act' is not an ANE op; legalize-ane must expand it (C2)");
  Graph s = unary_program(Op::Silu, "act");
  expect_one(validate(s), "C2", "act", "silu 'act' is not an ANE op; legalize-ane must expand it (C2)");
}

TEST(ValidateAne, MilHasNoNeg_LeftoverNegRejected) {
  Graph g = unary_program(Op::Neg, "n");
  expect_one(validate(g), "", "n", "neg 'n' has no MIL op; legalize-ane rewrites it to mul(x, -1)");
}

TEST(ValidateAne, C4_ConvWithBiasRejected) {
  Graph g;
  Value x = g.input("x", kX);
  Value y = g.add_node(Op::Conv1x1, {x, zeros(g, "w", {768, 768, 1, 1}), zeros(g, "b", {768})}, {}, "proj");
  g.add_output("y", y);
  expect_one(validate(g), "C4", "proj", "conv 'proj' has a bias; the ANE's conv takes none (C4)");
}

TEST(ValidateAne, C7_BuffersBelowMinimumRejected) {
  // A softmax over 8 positions could not be padded by legalize-ane: input and output stay small.
  Graph g;
  Value x = g.input("x", {ElemType::F16, {1, 768, 1, 8}});
  g.add_output("y", g.add_node(Op::Softmax, {x}, {{"axis", int64_t(-1)}}, "sm"));
  auto ds = validate(g);
  ASSERT_EQ(ds.size(), 2u) << describe(ds);
  EXPECT_EQ(ds[0].rule, "C7");
  EXPECT_EQ(ds[0].node, "x");
  EXPECT_EQ(ds[0].message,
            "program input 'x' fp16[1, 768, 1, 8] is 12288 bytes, below the minimum buffer of 49152 bytes (C7)");
  EXPECT_EQ(ds[1].rule, "C7");
  EXPECT_EQ(ds[1].node, "y");
  EXPECT_EQ(ds[1].message,
            "program output 'y' fp16[1, 768, 1, 8] is 12288 bytes, below the minimum buffer of 49152 bytes (C7)");
}

TEST(ValidateAne, C11_DanglingOutputRejected) {
  Graph g;
  Value x = g.input("x", kX);
  Value y = g.add_node(Op::Relu, {x}, {}, "act");
  g.add_output("y", y);
  g.add_output("gone", g.add_node(Op::Sigmoid, {x}, {}, "removed"));
  g.node_mut(g.find("removed")).dead = true;  // what an over-eager dead-code elimination leaves
  expect_one(validate(g), "C11", "gone", "output 'gone' does not name a live node (C11)");

  Graph none;
  none.input("x", kX);
  expect_one(validate(none), "C11", "", "program 'main' returns nothing (C11)");
}

TEST(ValidateAne, C12_ConvOver32kChannelsRejected) {
  // The GPT-2 classifier: 50,257 output channels. Weights as a program input here, so the test
  // needs no 77 MB constant; only the C12 finding matters.
  Graph g;
  Value x = g.input("x", kX);
  Value w = g.input("wte", {ElemType::F16, {50257, 768, 1, 1}});
  g.add_output("logits", g.add_node(Op::Conv1x1, {x, w}, {}, "classifier"));
  expect_one(with_rule(validate(g), "C12"), "C12", "classifier",
             "conv 'classifier' has 50257 output channels, more than the 16384 the ANE accepts (C12); run it on the CPU");

  Graph in;  // and the same limit on the input side (the classifier's backward pass)
  Value dy = in.input("dlogits", {ElemType::F16, {1, 50257, 1, 32}});
  Value wt = in.input("wte_t", {ElemType::F16, {768, 50257, 1, 1}});
  in.add_output("dx", in.add_node(Op::Conv1x1, {dy, wt}, {}, "classifier_bwd"));
  expect_one(with_rule(validate(in), "C12"), "C12", "classifier_bwd",
             "conv 'classifier_bwd' has 50257 input channels, more than the 16384 the ANE accepts (C12); run it on the CPU");

  Graph ok;  // at the limit: accepted
  Value x2 = ok.input("x", kX);
  ok.add_output("y", ok.add_node(Op::Conv1x1, {x2, ok.input("w", {ElemType::F16, {16384, 768, 1, 1}})}, {}, "wide"));
  EXPECT_TRUE(with_rule(validate(ok), "C12").empty());
}

TEST(ValidateAne, C14_NonAneLayoutAtBoundaryRejected) {
  Graph g;
  Value x = g.input("x", {ElemType::F16, {768, 64}});
  g.add_output("y", g.add_node(Op::Reshape, {x}, {{"shape", std::vector<int64_t>{1, 768, 1, 64}}}, "r"));
  expect_one(validate(g), "C14", "x", "program input 'x' has shape [768, 64]; ANE buffers are [1, C, 1, S] (C14)");
}

TEST(ValidateAne, C15_LeftoverAttentionRejected) {
  Graph g;
  Value q = g.input("q", {ElemType::F16, {1, 12, 64, 64}});
  Value o = g.add_node(Op::Attention, {q, q, q}, {}, "attn");
  g.add_output("o", g.add_node(Op::Reshape, {o}, {{"shape", std::vector<int64_t>{1, 768, 1, 64}}}, "merge"));
  expect_one(with_rule(validate(g), "C15"), "C15", "attn",
             "attention 'attn' must be expanded by legalize-ane: the ANE's sdpa ignores masks (C15)");
}

TEST(ValidateAne, C16_MoreThan16BlobConstantsRejected) {
  // n weight tensors chained by adds, plus `scalars` distinct scalar constants (each an inline
  // operand, each a slot); one scalar used twice costs one slot.
  auto build = [](int tensors, int scalars) {
    Graph g;
    Value h = g.input("x", kX);
    for (int i = 0; i < tensors; i++) h = g.add_node(Op::Add, {h, zeros(g, "w" + std::to_string(i), {1, 768, 1, 1})});
    for (int i = 0; i < scalars; i++) {
      Value s = g.scalar("s" + std::to_string(i), 1.0 + i);
      h = g.add_node(Op::Mul, {g.add_node(Op::Mul, {h, s}), s});
    }
    g.add_output("y", h);
    return g;
  };
  Graph ok = build(14, 2);
  EXPECT_EQ(describe(validate(ok)), "");
  Graph tensors = build(17, 0);
  expect_one(validate(tensors), "C16", "",
             "program 'main' needs 17 BLOBFILE constants (tensors: 17, inline scalars: 0), more than the 16 the ANE "
             "accepts (C16); split the program or pass weights as inputs");
  Graph mixed = build(15, 2);
  expect_one(validate(mixed), "C16", "",
             "program 'main' needs 17 BLOBFILE constants (tensors: 15, inline scalars: 2), more than the 16 the ANE "
             "accepts (C16); split the program or pass weights as inputs");
}

TEST(ValidateAne, C17_RsqrtRejectedOnChipsWithoutIt) {
  Graph g = unary_program(Op::Rsqrt, "r");
  expect_one(validate(g, m1()), "C17", "r", "rsqrt 'r' fails on m1; legalize-ane rewrites it to pow(x, -0.5) (C17)");
  EXPECT_EQ(describe(validate(g, m4())), "");
}

TEST(ValidateAne, C18_CastRejectedOnM1AndM2) {
  Graph g;
  Value x = g.input("x", kX);
  Value i = g.add_node(Op::Cast, {x}, {{"dtype", std::string("int32")}}, "toint");
  g.add_output("y", g.add_node(Op::Cast, {i}, {{"dtype", std::string("fp16")}}, "back"));
  auto ds = validate(g, chip_profile("m2"));
  ASSERT_EQ(ds.size(), 2u) << describe(ds);
  EXPECT_EQ(ds[0].rule, "C18");
  EXPECT_EQ(ds[0].node, "toint");
  EXPECT_EQ(ds[0].message, "cast 'toint' (fp16 -> int32) is not supported on m2 (C18)");
  EXPECT_EQ(ds[1].node, "back");
  EXPECT_EQ(describe(validate(g, m4())), "");
}

TEST(ValidateAne, Fp16Boundary_Fp32InputAndOutputRejected) {
  Graph g;
  Value x = g.input("x", {ElemType::F32, {1, 768, 1, 32}});
  g.add_output("y", g.add_node(Op::Relu, {x}, {}, "act"));
  auto ds = validate(g);
  ASSERT_EQ(ds.size(), 2u) << describe(ds);
  EXPECT_EQ(ds[0].rule, "");
  EXPECT_EQ(ds[0].node, "x");
  EXPECT_EQ(ds[0].message, "program input 'x' is fp32; ANE buffers are fp16 (the runtime converts host data)");
  EXPECT_EQ(ds[1].node, "y");
  EXPECT_EQ(ds[1].message, "program output 'y' is fp32; ANE buffers are fp16 (the runtime converts host data)");
}

TEST(ValidateAne, RepeatedRunsReplaceEarlierFindings) {
  // In the pipeline validate-ane runs every round: its findings must not pile up or go stale.
  Graph g = unary_program(Op::Gelu, "act");
  PassContext ctx;
  auto pass = make_validate_ane_pass();
  pass->run(g, ctx);
  pass->run(g, ctx);
  EXPECT_EQ(ctx.diagnostics.size(), 1u) << describe(ctx.diagnostics);
  ASSERT_TRUE(make_legalize_ane_pass()->run(g, ctx));
  pass->run(g, ctx);
  EXPECT_EQ(describe(ctx.diagnostics), "");
}

TEST(ValidateAne, StandardPipelineLegalisesThenValidates) {
  // A GPT-2-style FFN of 8 tokens with every rewritable problem: conv bias (C4), gelu (C2), a small
  // sequence (C7). The full pipeline leaves no error; the same program validated alone has four.
  auto build = [] {
    Graph g("ffn");
    Value x = g.input("x", {ElemType::F16, {1, 768, 1, 8}});
    Value h = g.add_node(Op::Conv1x1, {x, zeros(g, "w1", {3072, 768, 1, 1}), zeros(g, "b1", {3072})}, {}, "fc");
    h = g.add_node(Op::Gelu, {h}, {}, "act");
    h = g.add_node(Op::Conv1x1, {h, zeros(g, "w2", {768, 3072, 1, 1}), zeros(g, "b2", {768})}, {}, "proj");
    g.add_output("y", g.add_node(Op::Add, {x, h}, {}, "res"));
    return g;
  };
  Graph raw = build();
  auto ds = validate(raw);
  EXPECT_EQ(with_rule(ds, "C4").size(), 2u) << describe(ds);
  EXPECT_EQ(with_rule(ds, "C2").size(), 1u) << describe(ds);
  EXPECT_EQ(with_rule(ds, "C7").size(), 2u) << describe(ds);

  Graph g = build();
  PassContext ctx;
  PipelineOptions opt;
  opt.verify_each = true;
  run_pipeline(g, standard_pipeline(), ctx, opt);
  EXPECT_FALSE(ctx.has_errors()) << describe(ctx.diagnostics);
  EXPECT_EQ(g.node(g.find("x")).results[0].shape, (std::vector<int64_t>{1, 768, 1, 32}));
  EXPECT_EQ(ctx.ane_boundary.input_alloc_bytes, 49152);
  EXPECT_EQ(ctx.ane_boundary.output_alloc_bytes, 49152);
}

}  // namespace
}  // namespace orion::compiler
