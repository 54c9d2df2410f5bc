// The delta reload through the real driver against the fake framework (C10). The fake models the
// hardware's two paths: unload → rewrite weights/*.bin → load keeps computing with the old weights
// (the descriptor holds them), while a new, never-compiled model loaded from a folder with the
// compiled `data` file patched takes the new ones — the path AneDriver::replace_weight_files takes.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "anesim_reference.h"
#include "compiler/mil/emit_mil.h"
#include "fake_framework_env.h"
#include "runtime/ane/ane_core.h"
#include "runtime/ane/ane_driver.h"
#include "runtime/ane/ane_framework.h"

namespace orion::runtime::ane {
namespace {

using ir::ElemType;
using ir::Value;

// x [1, 64, 1, 384] → conv 1×1 with weight "w" (its values times `scale`) → y.
compiler::CompiledProgram scaled_conv(float scale) {
  ir::Graph g("conv");
  Value x = g.input("x", {ElemType::F16, {1, 64, 1, 384}});
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); i++) w[i] = test::process_scale() * scale * 0.01f * float(i % 13);
  g.add_output("y", g.add_node(ir::Op::Conv1x1, {x, g.constant_f32("w", {64, 64, 1, 1}, w)}, {}, "proj"));
  return compiler::emit_mil(g, compiler::default_chip());
}

using test::input_of;
std::vector<uint8_t> fresh(const compiler::CompiledProgram& p) { return test::fresh_output(p); }

TEST(AneDriverReload, DeltaReloadComputesAsAFreshCompileOfTheNewWeights) {
  ORION_REQUIRE_FAKE_FRAMEWORK();
  const auto one = scaled_conv(1.0f), two = scaled_conv(2.0f);
  ASSERT_EQ(one.mil_text, two.mil_text);
  ASSERT_NE(fresh(one), fresh(two));
  auto driver = make_ane_driver({});
  auto p = driver->compile(one.mil_text, one.weights, "conv");
  Surface x = input_of(one), y(one.outputs.alloc_bytes);
  driver->load(*p);
  driver->evaluate(*p, {&x}, {&y});
  EXPECT_EQ(std::vector<uint8_t>(y.data(), y.data() + y.alloc_bytes()), fresh(one));
  const int compiles = driver->counters().compiles;

  driver->unload(*p);
  driver->replace_weight_files(*p, two.weights);
  driver->load(*p);
  driver->evaluate(*p, {&x}, {&y});
  EXPECT_EQ(std::vector<uint8_t>(y.data(), y.data() + y.alloc_bytes()), fresh(two));
  EXPECT_EQ(driver->counters().compiles, compiles) << "the reload must not compile";
}

// A decompiled copy of the framework removes the model's folder at unload; the driver keeps the
// folder's files across it (KeptModelDir), so a plain reload and a delta reload still find the
// compiled `data` file they read.
TEST(AneDriverReload, AnUnloadThatRemovesTheFolderLosesNeitherReloadNorDeltaReload) {
  ORION_REQUIRE_FAKE_FRAMEWORK();
  setenv(test::kFakeUnloadRemovesFolderEnv, "1", 1);
  struct Unset {
    ~Unset() { unsetenv(test::kFakeUnloadRemovesFolderEnv); }
  } unset;
  const auto one = scaled_conv(1.0f), two = scaled_conv(2.0f);
  auto driver = make_ane_driver({});
  auto p = driver->compile(one.mil_text, one.weights, "conv");
  Surface x = input_of(one), y(one.outputs.alloc_bytes);
  driver->load(*p);
  const int compiles = driver->counters().compiles;

  driver->unload(*p);  // the fake removes the folder here
  driver->load(*p);
  driver->evaluate(*p, {&x}, {&y});
  EXPECT_EQ(std::vector<uint8_t>(y.data(), y.data() + y.alloc_bytes()), fresh(one));

  driver->unload(*p);  // as AneKernel::reload_weights calls it: unload, then replace the weights
  driver->replace_weight_files(*p, two.weights);
  driver->load(*p);
  driver->evaluate(*p, {&x}, {&y});
  EXPECT_EQ(std::vector<uint8_t>(y.data(), y.data() + y.alloc_bytes()), fresh(two));
  EXPECT_EQ(driver->counters().compiles, compiles) << "neither reload compiles";
}

// The variant public probes measured as stale, committed through the driver's Objective-C half.
TEST(AneDriverReload, RewritingTheWeightFilesOfALoadedModelIsStale) {
  ORION_REQUIRE_FAKE_FRAMEWORK();
  const auto one = scaled_conv(1.0f), two = scaled_conv(2.0f);
  auto framework = framework_connection();
  const auto entries = plan_weight_entries(one.weights, "conv");
  const std::string mil = test::process_own(one.mil_text);
  auto m = framework->create_model(mil, entries);
  ASSERT_NE(m, nullptr);
  const ModelDir dir = model_dir_layout(framework->temp_dir(), m->hex_identifier());
  write_model_dir(dir, mil, entries);
  ASSERT_TRUE(m->compile(kQoS).ok);
  ASSERT_TRUE(m->load(kQoS).ok);
  ASSERT_TRUE(m->unload(kQoS).ok);
  write_weight_files(dir, plan_weight_entries(two.weights, "conv"));
  ASSERT_TRUE(m->load(kQoS).ok);
  Surface x = input_of(one), y(one.outputs.alloc_bytes);
  ASSERT_TRUE(m->evaluate(kQoS, {&x}, {0}, {&y}, {0}).ok);
  EXPECT_EQ(std::vector<uint8_t>(y.data(), y.data() + y.alloc_bytes()), fresh(one)) << "the old weights, still";
  EXPECT_TRUE(m->unload(kQoS).ok);
  remove_model_dir(dir);
}

}  // namespace
}  // namespace orion::runtime::ane
