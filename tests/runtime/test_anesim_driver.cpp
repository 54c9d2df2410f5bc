// anesim as the hardware: binding order (C6), surface rules (status 0x1d: C5, C7, C13, C14), what
// the ANE compiler rejects (C1 concat, C2 gelu, C4 conv bias, C16 blob count, C12 wide conv, C18
// versions), the compile budget (C9) and stale delta reloads (C10).
#include <gtest/gtest.h>

#include "anesim_test_util.h"
#include "compiler/mil/emit_mil.h"
#include "runtime/driver.h"

namespace orion::runtime::anesim {
namespace {

using ir::ElemType;
using ir::Graph;
using ir::Op;
using ir::Tensor32;
using test::make_surfaces;
using test::random_t;
using test::read_surface;

const std::vector<int64_t> kX = {1, 768, 1, 32};  // 49,152 bytes of fp16: the C7 minimum exactly

compiler::CompiledProgram compiled(Graph g, const std::string& chip = "m4") {
  return compiler::compile_graph(g, compiler::chip_profile(chip)).program;
}

// y = conv(x, W) with W [C, C] = scale · (identity + 0.01·(i − j) pattern): a weight whose
// change is visible in every output.
Graph conv_program(float scale) {
  Graph g("conv");
  const int C = 768;
  std::vector<float> w(size_t(C) * C);
  for (int o = 0; o < C; o++)
    for (int i = 0; i < C; i++)
      w[size_t(o * C + i)] = scale * ((o == i ? 1.0f : 0.0f) + 0.001f * float((o * 7 + i * 3) % 11 - 5));
  ir::Value x = g.input("x", {ElemType::F16, kX});
  ir::Value W = g.constant_f32("w", {C, C, 1, 1}, w);
  g.add_output("y", g.add_node(Op::Conv1x1, {x, W}, {}, "y"));
  return g;
}

// Compile, load and evaluate a one-input, one-output program on x; returns the output.
Tensor32 run1(Driver& d, DriverProgram& p, const Tensor32& x, const std::vector<int64_t>& out_shape) {
  auto in = make_surfaces(1, 49152), out = make_surfaces(1, size_t(Tensor32(out_shape).numel() * 2));
  in.s[0].write_f32(x.data.data(), x.data.size());
  d.evaluate(p, in.ptrs(), out.ptrs());
  return read_surface(out.s[0], out_shape);
}

TEST(anesim_Driver, RegisteredByNameWithTheDefaultChip) {
  auto d = make_driver("anesim");
  EXPECT_EQ(d->name(), "anesim");
  EXPECT_EQ(d->chip().name, "m4");
  const auto names = driver_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "anesim"), names.end());
  DriverOptions o;
  o.chip = &compiler::chip_profile("m1");
  EXPECT_EQ(make_driver("anesim", o)->chip().name, "m1");
}

TEST(anesim_Driver, InputsAndOutputsBindInAlphabeticalOrderNotDeclarationOrder) {
  // Declared: inputs (z_first, a_second), outputs (y_diff, b_relu). Bound: (a_second, z_first),
  // (b_relu, y_diff). sub is not symmetric, so swapped inputs would show.
  Graph g("order");
  ir::Value z = g.input("z_first", {ElemType::F16, kX});
  ir::Value a = g.input("a_second", {ElemType::F16, kX});
  g.add_output("y_diff", g.add_node(Op::Sub, {z, a}, {}, "y_diff"));
  g.add_output("b_relu", g.add_node(Op::Relu, {z}, {}, "b_relu"));
  compiler::CompiledProgram cp = compiled(g);
  AnesimDriver d;
  auto p = d.compile(cp.mil_text, cp.weights, "order");
  EXPECT_EQ(p->input_names(), (std::vector<std::string>{"a_second", "z_first"}));
  EXPECT_EQ(p->output_names(), (std::vector<std::string>{"b_relu", "y_diff"}));
  d.load(*p);
  Tensor32 zv = random_t(kX, 1), av = random_t(kX, 2);
  auto in = make_surfaces(2, size_t(cp.inputs.alloc_bytes)), out = make_surfaces(2, size_t(cp.outputs.alloc_bytes));
  in.s[0].write_f32(av.data.data(), av.data.size());  // binding order: a_second first
  in.s[1].write_f32(zv.data.data(), zv.data.size());
  d.evaluate(*p, in.ptrs(), out.ptrs());
  Tensor32 relu = read_surface(out.s[0], kX), diff = read_surface(out.s[1], kX);
  for (size_t i = 0; i < zv.data.size(); i++) {
    ASSERT_EQ(relu.data[i], std::max(zv.data[i], 0.0f)) << i;
    ASSERT_EQ(diff.data[i], ir::round_to_fp16(zv.data[i] - av.data[i])) << i;
  }
  EXPECT_EQ(d.counters().evaluations, 1);
}

// A two-input, two-output program and surfaces that break one rule at a time.
struct TwoByTwo {
  AnesimDriver d;
  std::unique_ptr<DriverProgram> p;
  TwoByTwo() {
    Graph g("two");
    ir::Value a = g.input("a", {ElemType::F16, kX}), b = g.input("b", {ElemType::F16, kX});
    g.add_output("s", g.add_node(Op::Add, {a, b}, {}, "s"));
    g.add_output("t", g.add_node(Op::Mul, {a, b}, {}, "t"));
    compiler::CompiledProgram cp = compiled(g);
    p = d.compile(cp.mil_text, cp.weights, "two");
    d.load(*p);
  }
  std::string eval_error(std::vector<size_t> in_sizes, std::vector<size_t> out_sizes) {
    test::Surfaces in, out;
    for (size_t s : in_sizes) in.s.emplace_back(s);
    for (size_t s : out_sizes) out.s.emplace_back(s);
    try {
      d.evaluate(*p, in.ptrs(), out.ptrs());
    } catch (const DriverError& e) {
      EXPECT_EQ(e.status(), DriverStatus::BadSurfaces) << e.what();
      return e.what();
    }
    return "";
  }
};

TEST(anesim_Driver, Status0x1dForSmallNonUniformOrTooShortSurfaces) {
  TwoByTwo t;
  EXPECT_EQ(t.eval_error({49152, 49152}, {49152, 49152}), "");  // the minimum itself is fine
  EXPECT_EQ(t.eval_error({65536, 65536}, {98304, 98304}), "");  // larger, uniform: fine (C14: data at byte 0)
  // C7: below the minimum, although the data would fit.
  std::string e = t.eval_error({32768, 32768}, {49152, 49152});
  EXPECT_NE(e.find("0x1d"), std::string::npos) << e;
  EXPECT_NE(e.find("'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("C7"), std::string::npos) << e;
  // C13: inputs of two sizes; C5: outputs of two sizes.
  e = t.eval_error({49152, 65536}, {49152, 49152});
  EXPECT_NE(e.find("0x1d"), std::string::npos) << e;
  EXPECT_NE(e.find("'b' has 65536"), std::string::npos) << e;
  EXPECT_NE(e.find("C13"), std::string::npos) << e;
  e = t.eval_error({49152, 49152}, {65536, 49152});
  EXPECT_NE(e.find("C5"), std::string::npos) << e;
  EXPECT_NE(e.find("output"), std::string::npos) << e;
  EXPECT_EQ(t.d.counters().evaluations, 2);
}

TEST(anesim_Driver, Status0x1dWhenTheDataDoesNotFitAMinimumSizedSurface) {
  AnesimDriver d;
  Graph g("wide");
  const std::vector<int64_t> big = {1, 768, 1, 64};  // 98,304 bytes
  g.add_output("y", g.add_node(Op::Relu, {g.input("x", {ElemType::F16, big})}, {}, "y"));
  compiler::CompiledProgram cp = compiled(g);
  auto p = d.compile(cp.mil_text, cp.weights, "wide");
  d.load(*p);
  auto in = make_surfaces(1, 49152), out = make_surfaces(1, 98304);
  try {
    d.evaluate(*p, in.ptrs(), out.ptrs());
    FAIL() << "a 49,152-byte surface cannot hold 98,304 bytes";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), DriverStatus::BadSurfaces);
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(d.evaluate(*p, in.ptrs(), {}), DriverError);  // wrong surface count
  d.unload(*p);
  auto in2 = make_surfaces(1, 98304);
  EXPECT_THROW(d.evaluate(*p, in2.ptrs(), out.ptrs()), DriverError);  // not loaded
}

// Compiling `cp` must fail with CompileFailed mentioning every one of `words`.
void expect_rejected(const compiler::CompiledProgram& cp, const std::vector<std::string>& words,
                     const std::string& chip = "m4") {
  DriverOptions o;
  o.chip = &compiler::chip_profile(chip);
  AnesimDriver d(o);
  try {
    d.compile(cp.mil_text, cp.weights, cp.name);
    ADD_FAILURE() << cp.name << " compiled";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), DriverStatus::CompileFailed);
    std::printf("  %s on %s: %s\n", cp.name.c_str(), chip.c_str(), e.what());
    for (const std::string& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << w << " in " << e.what();
  }
  EXPECT_EQ(d.counters().failed_compiles, 1);
}

// emit_mil without the pipeline: MIL a careless emitter could write, which the ANE refuses.
compiler::CompiledProgram raw(const Graph& g) { return compiler::emit_mil(g, compiler::default_chip()); }

TEST(anesim_Driver, RejectsConcatGeluConvBiasTooManyBlobsAndWideConvsAtCompile) {
  {  // C1: concat inside the program
    Graph g("concat");
    ir::Value a = g.input("a", {ElemType::F16, kX}), b = g.input("b", {ElemType::F16, kX});
    ir::Value c = g.add_node(Op::Concat, {a, b}, {{"axis", int64_t(1)}}, "c");
    g.add_output("y", g.add_node(Op::Relu, {c}, {}, "y"));
    expect_rejected(raw(g), {"C1", "'c'"});
  }
  {  // C2: gelu is not an ANE op (a relu program with the op renamed)
    Graph g("gelu");
    g.add_output("y", g.add_node(Op::Relu, {g.input("x", {ElemType::F16, kX})}, {}, "y"));
    compiler::CompiledProgram cp = raw(g);
    const size_t at = cp.mil_text.find("relu(");
    ASSERT_NE(at, std::string::npos);
    cp.mil_text.replace(at, 4, "gelu");
    expect_rejected(cp, {"gelu", "C2"});
  }
  {  // C4: conv with a bias
    Graph g("conv_bias");
    ir::Value x = g.input("x", {ElemType::F16, kX});
    ir::Value W = g.constant_f32("w", {768, 768, 1, 1}, std::vector<float>(768 * 768, 0.01f));
    ir::Value bias = g.constant_f32("bias", {768}, std::vector<float>(768, 0.5f));
    g.add_output("y", g.add_node(Op::Conv1x1, {x, W, bias}, {}, "y"));
    expect_rejected(raw(g), {"C4", "'y'"});
  }
  {  // C16: 17 tensor constants
    Graph g("blobs");
    ir::Value v = g.input("x", {ElemType::F16, kX});
    for (int i = 0; i < 17; i++)
      v = g.add_node(Op::Add,
                     {v, g.constant_f32("c" + std::to_string(i), {1, 768, 1, 1}, std::vector<float>(768, float(i)))});
    g.add_output("y", g.add_node(Op::Identity, {v}, {}, "y"));
    expect_rejected(raw(g), {"C16", "17"});
  }
  {  // C12: 20,000 output channels
    Graph g("wide_conv");
    ir::Value x = g.input("x", {ElemType::F16, {1, 16, 1, 1536}});
    ir::Value W = g.constant_f32("w", {20000, 16, 1, 1}, std::vector<float>(20000 * 16, 0.01f));
    g.add_output("y", g.add_node(Op::Conv1x1, {x, W}, {}, "y"));
    expect_rejected(raw(g), {"C12", "20000"});
  }
}

TEST(anesim_Driver, OlderChipsRejectNewerMilVersions) {
  // M4's program(1.3) is refused by M1's compiler (C18); M1's program(1.0) runs on M4.
  compiler::CompiledProgram m4 = compiled(conv_program(1.0f), "m4"), m1 = compiled(conv_program(1.0f), "m1");
  expect_rejected(m4, {"C18", "1.3"}, "m1");
  AnesimDriver d;
  EXPECT_NO_THROW(d.compile(m1.mil_text, m1.weights, "m1_on_m4"));
}

TEST(anesim_Driver, CompileBudgetFailsCompile120NamingC9) {
  Graph g("tiny");
  g.add_output("y", g.add_node(Op::Relu, {g.input("x", {ElemType::F16, kX})}, {}, "y"));
  compiler::CompiledProgram cp = compiled(g);
  AnesimDriver d;
  ASSERT_EQ(d.chip().compile_budget, 119);
  for (int i = 1; i <= 119; i++) ASSERT_NO_THROW(d.compile(cp.mil_text, cp.weights, "tiny")) << "compile " << i;
  try {
    d.compile(cp.mil_text, cp.weights, "tiny");
    FAIL() << "compile #120 succeeded";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), DriverStatus::CompileFailed);
    EXPECT_NE(std::string(e.what()).find("C9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("#120"), std::string::npos) << e.what();
  }
  EXPECT_EQ(d.counters().compiles, 120);
  EXPECT_EQ(d.counters().failed_compiles, 1);
  EXPECT_THROW(d.compile(cp.mil_text, cp.weights, "tiny"), DriverError);  // and it stays spent
}

// Delta reload: compile with W1, unload, overwrite the weight files with W2's, load, evaluate.
Tensor32 after_delta_reload(bool reload_takes_effect, Tensor32* before) {
  compiler::CompiledProgram w1 = compiled(conv_program(1.0f)), w2 = compiled(conv_program(-2.0f));
  EXPECT_EQ(w1.mil_text, w2.mil_text);  // same program, other weights
  EXPECT_NE(w1.weights, w2.weights);
  DriverOptions o;
  o.reload_takes_effect = reload_takes_effect;
  AnesimDriver d(o);
  WeightDict dict = w1.weights;
  auto p = d.compile(w1.mil_text, dict, "conv");
  dict = w2.weights;  // the caller's dictionary changing after compile changes nothing
  d.load(*p);
  Tensor32 x = random_t(kX, 5);
  *before = run1(d, *p, x, kX);
  d.unload(*p);
  d.replace_weight_files(*p, w2.weights);
  d.load(*p);
  Tensor32 after = run1(d, *p, x, kX);
  EXPECT_EQ(d.counters().loads, 2);
  EXPECT_EQ(d.counters().unloads, 1);
  return after;
}

TEST(anesim_Driver, DeltaReloadIsStaleByDefaultAndTakesEffectWhenTheProfileSaysSo) {
  Tensor32 before, after = after_delta_reload(false, &before);
  EXPECT_EQ(after.data, before.data);  // C10: the compiled network kept the old weights
  after = after_delta_reload(true, &before);
  // W2 = −2·W1, so y2 ≈ −2·y1 (within fp16 rounding of the two results).
  size_t agree = 0;
  for (size_t i = 0; i < after.data.size(); i++)
    agree += std::fabs(after.data[i] + 2.0f * before.data[i]) <= 1e-2f * (1.0f + std::fabs(after.data[i]));
  EXPECT_EQ(agree, after.data.size());
}

TEST(anesim_Driver, ReplacingAFileTheProgramDoesNotHaveFails) {
  compiler::CompiledProgram cp = compiled(conv_program(1.0f));
  AnesimDriver d;
  auto p = d.compile(cp.mil_text, cp.weights, "conv");
  EXPECT_THROW(d.replace_weight_files(*p, {{"@model_path/weights/nope.bin", {}}}), DriverError);
  AnesimDriver other;
  EXPECT_THROW(other.load(*p), DriverError);  // programs belong to the driver that compiled them
}

}  // namespace
}  // namespace orion::runtime::anesim
