// The core runtime on anesim: surfaces, the driver registry, the kernel runner's boundary work
// (binding order C6, uniform and minimum sizes C5/C7/C13, padding C7, flattened C14 and split C1
// outputs), the program cache and the compile budget (C9).
#include <gtest/gtest.h>

#include "anesim_runtime_util.h"
#include "base/dtype.h"
#include "runtime/ane_kernel.h"
#include "runtime/compile_budget.h"
#include "runtime/program_cache.h"

namespace orion::runtime {
namespace {

using ir::ElemType;
using ir::Op;
using ir::Tensor32;
using test::anesim_driver;
using test::uniform_tensor;

// Inputs declared zeta, alpha and outputs z_diff, a_prod: both orders differ from the alphabetical
// one the hardware binds by, and sub / mul by relu are not symmetric, so a swap shows.
ir::Graph binding_graph() {
  ir::Graph g("binding");
  ir::Value zeta = g.input("zeta", {ElemType::F16, {1, 768, 1, 32}});
  ir::Value alpha = g.input("alpha", {ElemType::F16, {1, 768, 1, 32}});
  g.add_output("z_diff", g.add_node(Op::Sub, {zeta, alpha}));
  g.add_output("a_prod", g.add_node(Op::Mul, {alpha, g.add_node(Op::Relu, {zeta})}));
  return g;
}

TEST(anesim_Runtime, SurfaceHoldsPackedFp16FromByteZero) {
  Surface s(4096);
  std::vector<float> x = {1.0f, -2.5f, 0.333333f, 65504.0f, 1e-3f};
  s.write_f32(x.data(), x.size());
  EXPECT_EQ(s.f16()[0], f32_to_f16(1.0f));
  EXPECT_EQ(s.f16()[2], f32_to_f16(0.333333f));
  for (size_t i = x.size() * 2; i < s.alloc_bytes(); i++) ASSERT_EQ(s.data()[i], 0) << "byte " << i;
  std::vector<float> back(x.size());
  s.read_f32(back.data(), back.size());
  for (size_t i = 0; i < x.size(); i++) EXPECT_EQ(back[i], f16_to_f32(f32_to_f16(x[i])));
  EXPECT_THROW(s.write_f32(std::vector<float>(2049).data(), 2049), Error);  // does not fit
}

TEST(anesim_Runtime, RegistryHasAnesimAndExplainsAMissingAne) {
  std::vector<std::string> names = driver_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "anesim"), names.end());
  EXPECT_EQ(anesim_driver()->name(), "anesim");
#ifndef __APPLE__
  try {
    make_driver("ane");
    FAIL() << "make_driver(\"ane\") should throw off macOS";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), DriverStatus::NotAvailable);
    EXPECT_NE(e.message().find("not available on this platform"), std::string::npos) << e.message();
    EXPECT_NE(e.context().hint.find("anesim"), std::string::npos);
  }
#endif
  try {
    make_driver("tpu");
    FAIL() << "an unknown driver name should throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(e.message().find("anesim"), std::string::npos) << e.message();
  }
}

TEST(anesim_Runtime, BindsInAlphabeticalOrderWhateverTheDeclaredOrder) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  ir::Graph g = binding_graph();
  auto k = AneKernel::compile(*driver, budget, g);
  EXPECT_EQ(k->program().inputs.names(), (std::vector<std::string>{"alpha", "zeta"}));
  EXPECT_EQ(k->program().outputs.names(), (std::vector<std::string>{"a_prod", "z_diff"}));
  EXPECT_EQ(k->program().inputs.bindings[0].declared_index, 1);  // alpha was declared second
  TensorMap in = {{"zeta", uniform_tensor({1, 768, 1, 32}, 1)}, {"alpha", uniform_tensor({1, 768, 1, 32}, 2, 2, 3)}};
  TensorMap out = k->run(in);
  // zeta ∈ [−1, 1) and alpha ∈ [2, 3): a swapped binding makes z_diff positive.
  for (float v : out.at("z_diff").data) ASSERT_LT(v, 0.0f);
  test::expect_matches_interpreter(g, in, out, 2e-3);
  EXPECT_EQ(k->timing().runs, 1);
  EXPECT_GT(k->timing().evaluate_s, 0.0);
}

TEST(anesim_Runtime, SurfacesAreUniformAndAtLeastTheMinimum) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  // x is 49,152 bytes, w 98,304: the runner gives both inputs w's size (C13), and both outputs
  // the larger one's (C5). (Each must also reach the minimum on its own: validate-ane, C7.)
  ir::Graph gr("uniform");
  ir::Value x = gr.input("x", {ElemType::F16, {1, 768, 1, 32}});
  ir::Value w = gr.input("w", {ElemType::F16, {1, 768, 1, 64}});
  gr.add_output("y", gr.add_node(Op::Relu, {x}));
  gr.add_output("s", gr.add_node(Op::Sigmoid, {w}));
  auto k = AneKernel::compile(*driver, budget, gr);
  TensorMap in = {{"x", uniform_tensor({1, 768, 1, 32}, 3)}, {"w", uniform_tensor({1, 768, 1, 64}, 4)}};
  TensorMap out = k->run(in);
  test::expect_matches_interpreter(gr, in, out, 2e-3);
  EXPECT_EQ(k->program().inputs.alloc_bytes, 98304);
  EXPECT_EQ(k->program().outputs.alloc_bytes, 98304);
  const int64_t min = driver->chip().min_buffer_bytes;
  for (const Surface& s : k->input_surfaces()) EXPECT_EQ(int64_t(s.alloc_bytes()), k->program().inputs.alloc_bytes);
  for (const Surface& s : k->output_surfaces()) EXPECT_EQ(int64_t(s.alloc_bytes()), k->program().outputs.alloc_bytes);
  EXPECT_GE(k->program().inputs.alloc_bytes, min);
  EXPECT_GE(k->program().outputs.alloc_bytes, min);

  // Hand-made surfaces that break the rules evaluate with status 0x1d.
  auto expect_0x1d = [&](std::vector<size_t> in_sizes, std::vector<size_t> out_sizes, const char* what) {
    std::vector<Surface> ins, outs;
    for (size_t b : in_sizes) ins.emplace_back(b);
    for (size_t b : out_sizes) outs.emplace_back(b);
    std::vector<Surface*> ip, op;
    for (Surface& s : ins) ip.push_back(&s);
    for (Surface& s : outs) op.push_back(&s);
    try {
      driver->evaluate(k->driver_program(), ip, op);
      ADD_FAILURE() << what << ": evaluated";
    } catch (const DriverError& e) {
      EXPECT_EQ(e.status(), DriverStatus::BadSurfaces) << what << ": " << e.message();
    }
  };
  const size_t a_in = size_t(k->program().inputs.alloc_bytes), a_out = size_t(k->program().outputs.alloc_bytes);
  expect_0x1d({49152, a_in}, {a_out, a_out}, "inputs of their own packed sizes (not uniform, C13)");
  expect_0x1d({a_in, a_in}, {49152, a_out}, "outputs of their own packed sizes (not uniform, C5)");
  expect_0x1d({a_in, a_in + 64}, {a_out, a_out}, "inputs one alignment step apart (C13)");
  // The same evaluation with the runner's sizes goes through.
  std::vector<Surface> ins(2, Surface(a_in)), outs(2, Surface(a_out));
  EXPECT_NO_THROW(driver->evaluate(k->driver_program(), {&ins[0], &ins[1]}, {&outs[0], &outs[1]}));
}

TEST(anesim_Runtime, SmallBuffersBelowTheMinimumAreRefused) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  auto k = AneKernel::compile(*driver, budget, binding_graph());
  const size_t small = size_t(driver->chip().min_buffer_bytes) / 2;  // uniform, but below C7
  std::vector<Surface> ins(2, Surface(small)), outs(2, Surface(small));
  try {
    driver->evaluate(k->driver_program(), {&ins[0], &ins[1]}, {&outs[0], &outs[1]});
    FAIL() << "buffers below the minimum evaluated";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), DriverStatus::BadSurfaces) << e.message();
  }
}

TEST(anesim_Runtime, PaddedSequenceAndSplitOutputsAreUndone) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  // x is 64 × 8 fp16 = 1 KB, far below C7: legalize-ane pads the sequence; the concat (C1)
  // becomes two outputs that the runner joins again.
  ir::Graph g("pad_split");
  ir::Value x = g.input("x", {ElemType::F16, {1, 64, 1, 8}});
  ir::Value a = g.add_node(Op::Relu, {x});
  ir::Value b = g.add_node(Op::Sigmoid, {x});
  g.add_output("joined", g.add_node(Op::Concat, {a, b}, {{"axis", int64_t(1)}}));
  g.add_output("t", g.add_node(Op::Tanh, {x}));
  auto k = AneKernel::compile(*driver, budget, g);
  ASSERT_EQ(k->boundary().output_splits.size(), 1u);
  const compiler::BoundaryChange* cx = k->boundary().find_change("x", true);
  ASSERT_NE(cx, nullptr);
  EXPECT_GT(cx->legalized.shape[3], 8);
  TensorMap in = {{"x", uniform_tensor({1, 64, 1, 8}, 5, -3, 3)}};
  TensorMap out = k->run(in);
  EXPECT_EQ(out.at("joined").shape, (std::vector<int64_t>{1, 128, 1, 8}));
  test::expect_matches_interpreter(g, in, out, 2e-3);
  // Padding is written as zeros: relu(0) = 0 in the padded columns of the first part's buffer.
  const Surface& in_surface = k->input_surfaces()[0];
  const int64_t S = cx->legalized.shape[3];
  for (int64_t c = 0; c < 64; c++)
    for (int64_t s = 8; s < S; s++) ASSERT_EQ(in_surface.f16()[c * S + s], 0) << c << "," << s;
}

TEST(anesim_Runtime, FlattenedBoundaryTensorsKeepTheirDeclaredShape) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  ir::Graph g("flat");  // [1, 8, 64, 64] is not [1, C, 1, S]: declared flat, reshaped inside (C14)
  ir::Value p = g.input("p", {ElemType::F16, {1, 8, 64, 64}});
  g.add_output("probs", g.add_node(Op::Softmax, {p}, {{"axis", int64_t(-1)}}));
  auto k = AneKernel::compile(*driver, budget, g);
  ASSERT_NE(k->boundary().find_change("p", true), nullptr);
  TensorMap in = {{"p", uniform_tensor({1, 8, 64, 64}, 6, -4, 4)}};
  TensorMap out = k->run(in);
  EXPECT_EQ(out.at("probs").shape, (std::vector<int64_t>{1, 8, 64, 64}));
  test::expect_matches_interpreter(g, in, out, 2e-3);
  // A wrongly shaped input is a usage error naming it.
  try {
    k->run({{"p", Tensor32({1, 8, 1, 4096})}});
    FAIL() << "a misshapen input ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_EQ(e.context().field, "p");
  }
}

TEST(anesim_ProgramCache, HitsMissesAndEvictionByWeightsVersion) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  ProgramCache cache(*driver, budget);
  int builds = 0;
  auto build = [&] {
    builds++;
    return binding_graph();
  };
  ProgramKey key{"toy", "binding", 0, 32, 1};
  auto first = cache.get(key, build);
  auto again = cache.get(key, build);
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ(builds, 1);
  ProgramKey other_layer = key;
  other_layer.layer = 1;
  auto second = cache.get(other_layer, build);
  EXPECT_NE(second.get(), first.get());
  ProgramKey newer = key;
  newer.weights_version = 2;
  auto updated = cache.get(newer, build);
  EXPECT_NE(updated.get(), first.get());
  EXPECT_FALSE(first->loaded()) << "the evicted program must be unloaded";
  EXPECT_TRUE(updated->loaded());
  EXPECT_EQ(cache.find(key), nullptr);
  EXPECT_EQ(cache.find(newer).get(), updated.get());
  CacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 3);
  EXPECT_EQ(s.evictions, 1);
  EXPECT_EQ(s.resident, 2);
  EXPECT_EQ(driver->counters().compiles, 3);
  EXPECT_NE(s.str().find("1 hits, 3 misses"), std::string::npos) << s.str();
  EXPECT_NE(s.str().find("1 evictions"), std::string::npos) << s.str();
  EXPECT_EQ(key.str(), "toy/binding/layer0/S32/v1");
  cache.clear();
  EXPECT_FALSE(updated->loaded());
  EXPECT_EQ(cache.stats().resident, 0);
}

TEST(anesim_CompileBudget, WarnsOnceAtNinetyPercentAndRefusesAtTheLimit) {
  CompileBudget budget(10);
  EXPECT_EQ(budget.warn_at(), 9);
  testing::internal::CaptureStderr();
  for (int i = 0; i < 8; i++) budget.charge("p");
  EXPECT_FALSE(budget.warned());
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  testing::internal::CaptureStderr();
  budget.charge("p");
  budget.charge("p");
  const std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(budget.warned());
  EXPECT_NE(warning.find("9 of 10"), std::string::npos) << warning;
  EXPECT_EQ(warning.find("10 of 10"), std::string::npos) << "warned twice: " << warning;
  EXPECT_EQ(budget.remaining(), 0);
  try {
    budget.charge("layer07.fwd_attn");
    FAIL() << "the 11th compile of a budget of 10 was allowed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(e.message().find("layer07.fwd_attn"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("C9"), std::string::npos) << e.message();
    EXPECT_FALSE(e.context().hint.empty());
  }
  EXPECT_EQ(budget.used(), 10);
}

TEST(anesim_CompileBudget, RefusesBeforeTheDriverCompilesAndFollowsItsCount) {
  auto driver = anesim_driver();
  CompileBudget budget = CompileBudget::for_driver(*driver);
  EXPECT_EQ(budget.limit(), driver->chip().compile_budget);
  EXPECT_EQ(budget.remaining(), driver->chip().compile_budget);
  CompileBudget small(2);
  auto a = AneKernel::compile(*driver, small, binding_graph());
  auto b = AneKernel::compile(*driver, small, binding_graph());
  EXPECT_THROW(AneKernel::compile(*driver, small, binding_graph()), Error);
  EXPECT_EQ(driver->counters().compiles, 2) << "the refused compile reached the driver";
  // A budget made later starts from the driver's count; one shared by others adopts it.
  EXPECT_EQ(CompileBudget::for_driver(*driver).used(), 2);
  CompileBudget fresh(5);
  fresh.charge("p", driver.get());
  EXPECT_EQ(fresh.used(), 3);
  EXPECT_EQ(fresh.remaining(), 2);
}

}  // namespace
}  // namespace orion::runtime
