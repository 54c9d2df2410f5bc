// Every misuse the fake framework detects, committed through the Apple driver's real Objective-C++
// (the Framework calls of ane_driver.mm, reached with ane::framework_connection()) and refused by
// the fake — and a whole driver run that commits none. What the driver's C++ half never lets
// through (AneDriver checks first) is committed here by calling the Objective-C half directly.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "compiler/mil/emit_mil.h"
#include "fake_framework_env.h"
#include "runtime/ane/ane_core.h"
#include "runtime/ane/ane_driver.h"
#include "runtime/ane/ane_framework.h"
#include "runtime/anesim/anesim_driver.h"

namespace orion::runtime::ane {
namespace {

using ir::ElemType;
using ir::Value;

// The fake's own test functions, found in the library the driver loaded.
struct FakeLibrary {
  const char* (*last_misuse)() = nullptr;
  void (*clear_misuse)() = nullptr;
  void* (*create_surface)(size_t) = nullptr;
  int (*lock)(void*, uint32_t, uint32_t*) = nullptr;
  int (*unlock)(void*, uint32_t, uint32_t*) = nullptr;
  void* (*base_address)(void*) = nullptr;
  int (*compiles)() = nullptr;  // this process's compile calls so far
  // Commits one misuse the driver cannot be made to (fake/fake_probes.mm); returns what the fake recorded.
  const char* (*probe)(const char* which, const char* mil, size_t in_bytes, size_t out_bytes) = nullptr;
};

FakeLibrary fake_library() {
  FakeLibrary f;
#ifdef ORION_ANE_FAKE_LIBRARY
  void* lib = dlopen(ORION_ANE_FAKE_LIBRARY, RTLD_NOW);
  auto find = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    EXPECT_NE(reinterpret_cast<void*>(fn), nullptr) << name;
  };
  find(f.last_misuse, "orion_fake_ane_last_misuse");
  find(f.clear_misuse, "orion_fake_ane_clear_misuse");
  find(f.create_surface, "orion_fake_ane_create_surface");
  find(f.lock, "IOSurfaceLock");
  find(f.unlock, "IOSurfaceUnlock");
  find(f.base_address, "IOSurfaceGetBaseAddress");
  find(f.compiles, "orion_fake_ane_compiles");
  find(f.probe, "orion_fake_ane_probe");
#endif
  return f;
}

// x [1, 64, 1, 384] → conv 1×1 with weight "w" → y, and relu(y) → z: 48 KiB surfaces (C7).
compiler::CompiledProgram conv_program(float scale = 1.0f) {
  ir::Graph g("conv");
  Value x = g.input("x", {ElemType::F16, {1, 64, 1, 384}});
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); i++) w[i] = scale * 0.01f * float(i % 13);
  Value y = g.add_node(ir::Op::Conv1x1, {x, g.constant_f32("w", {64, 64, 1, 1}, w)}, {}, "proj");
  g.add_output("y", y);
  g.add_output("z", g.add_node(ir::Op::Relu, {y}, {}, "act"));
  return compiler::emit_mil(g, compiler::default_chip());
}

class AneDriverMisuse : public ::testing::Test {
 protected:
  void SetUp() override {
    ORION_REQUIRE_FAKE_FRAMEWORK();
    framework = framework_connection();
    fake = fake_library();
    fake.clear_misuse();
    prog = conv_program(test::process_scale());
    prog.mil_text = test::process_own(prog.mil_text);
    entries = plan_weight_entries(prog.weights, "conv");
    in.resize(prog.inputs.alloc_bytes);
    out.resize(prog.outputs.alloc_bytes);
    out2.resize(prog.outputs.alloc_bytes);
  }
  std::string last_misuse() const { return fake.last_misuse(); }

  // A model whose folder is written, as AneDriver::compile leaves it before compiling.
  std::unique_ptr<FrameworkModel> model_with_folder() {
    auto m = framework->create_model(prog.mil_text, entries);
    EXPECT_NE(m, nullptr);
    dir = model_dir_layout(framework->temp_dir(), m->hex_identifier());
    write_model_dir(dir, prog.mil_text, entries);
    return m;
  }
  std::unique_ptr<FrameworkModel> loaded_model() {
    auto m = model_with_folder();
    EXPECT_TRUE(m->compile(kQoS).ok);
    EXPECT_TRUE(m->load(kQoS).ok);
    return m;
  }
  void TearDown() override {
    if (!dir.root.empty()) remove_model_dir(dir);
  }

  std::shared_ptr<Framework> framework;
  FakeLibrary fake;
  compiler::CompiledProgram prog;
  std::vector<WeightEntry> entries;
  ModelDir dir;
  Surface in, out, out2;  // the program's sizes
};

TEST_F(AneDriverMisuse, ADriverRunCommitsNoneAndComputesAsAnesim) {
  auto driver = make_ane_driver({});
  auto sim = anesim::make_anesim_driver();
  auto p = driver->compile(prog.mil_text, prog.weights, "conv");
  auto q = sim->compile(prog.mil_text, prog.weights, "conv");
  Surface x(prog.inputs.alloc_bytes), y(prog.outputs.alloc_bytes), z(prog.outputs.alloc_bytes),
      want_y(prog.outputs.alloc_bytes), want_z(prog.outputs.alloc_bytes);
  std::vector<float> v(64 * 384);
  for (size_t i = 0; i < v.size(); i++) v[i] = float(i % 29) / 29.0f - 0.5f;
  x.write_f32(v.data(), v.size());
  sim->load(*q);
  sim->evaluate(*q, {&x}, {&want_y, &want_z});
  // Load, evaluate, unload, load, evaluate: the second load binds a new request and new surfaces.
  for (int round = 0; round < 2; round++) {
    driver->load(*p);
    y.clear();
    z.clear();
    driver->evaluate(*p, {&x}, {&y, &z});
    EXPECT_EQ(std::memcmp(y.data(), want_y.data(), y.alloc_bytes()), 0) << "round " << round;
    EXPECT_EQ(std::memcmp(z.data(), want_z.data(), z.alloc_bytes()), 0) << "round " << round;
    driver->unload(*p);
  }
  EXPECT_EQ(last_misuse(), "");
}

TEST_F(AneDriverMisuse, QoSOtherThan21) {
  auto m = model_with_folder();
  CallResult r = m->compile(20);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(last_misuse().find("QoS 20, not 21"), std::string::npos) << last_misuse();
  ASSERT_TRUE(m->compile(kQoS).ok);
  fake.clear_misuse();
  EXPECT_FALSE(m->load(0).ok);
  EXPECT_NE(last_misuse().find("loadWithQoS"), std::string::npos) << last_misuse();
  ASSERT_TRUE(m->load(kQoS).ok);
  fake.clear_misuse();
  EXPECT_FALSE(m->evaluate(9, {&in}, {0}, {&out, &out2}, {0, 1}).ok);
  EXPECT_NE(last_misuse().find("evaluateWithQoS"), std::string::npos) << last_misuse();
  fake.clear_misuse();
  EXPECT_FALSE(m->unload(33).ok);
  EXPECT_NE(last_misuse().find("unloadWithQoS"), std::string::npos) << last_misuse();
}

TEST_F(AneDriverMisuse, WeightKeyOutsideTheModelFolder) {
  entries[0].key = "weights/w.bin";
  EXPECT_EQ(framework->create_model(prog.mil_text, entries), nullptr);
  EXPECT_NE(last_misuse().find("does not start with @model_path/weights/"), std::string::npos) << last_misuse();
}

TEST_F(AneDriverMisuse, WeightOffsetOtherThanZero) {
  entries[0].offset = 64;
  EXPECT_EQ(framework->create_model(prog.mil_text, entries), nullptr);
  EXPECT_NE(last_misuse().find("offset other than 0"), std::string::npos) << last_misuse();
}

TEST_F(AneDriverMisuse, CompileWithoutTheModelFolderOrWithOtherWeightFiles) {
  auto m = framework->create_model(prog.mil_text, entries);
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->compile(kQoS).ok);  // nothing written under <tmp>/<hex>/
  EXPECT_NE(last_misuse().find("model.mil differs"), std::string::npos) << last_misuse();

  auto n = model_with_folder();
  std::ofstream(dir.path_of(entries[0]), std::ios::binary | std::ios::app) << "x";  // one byte more
  fake.clear_misuse();
  EXPECT_FALSE(n->compile(kQoS).ok);
  EXPECT_NE(last_misuse().find("differs from weight '@model_path/weights/"), std::string::npos) << last_misuse();
}

TEST_F(AneDriverMisuse, CallsOutOfTheStateMachine) {
  auto m = model_with_folder();
  EXPECT_FALSE(m->load(kQoS).ok);
  EXPECT_NE(last_misuse().find("load of a model neither compiled"), std::string::npos) << last_misuse();
  ASSERT_TRUE(m->compile(kQoS).ok);
  EXPECT_FALSE(m->compile(kQoS).ok);
  EXPECT_NE(last_misuse().find("compile of a model already compiled"), std::string::npos) << last_misuse();
  EXPECT_FALSE(m->evaluate(kQoS, {&in}, {0}, {&out, &out2}, {0, 1}).ok);
  EXPECT_NE(last_misuse().find("evaluate of a model that is not loaded"), std::string::npos) << last_misuse();
  EXPECT_FALSE(m->unload(kQoS).ok);
  EXPECT_NE(last_misuse().find("unload of a model that is not loaded"), std::string::npos) << last_misuse();
  ASSERT_TRUE(m->load(kQoS).ok);
  EXPECT_FALSE(m->load(kQoS).ok);
  EXPECT_NE(last_misuse().find("load of a model already loaded"), std::string::npos) << last_misuse();
  EXPECT_TRUE(m->unload(kQoS).ok);
}

TEST_F(AneDriverMisuse, IndicesThatAreNotZeroToN) {
  auto m = loaded_model();
  EXPECT_FALSE(m->evaluate(kQoS, {&in}, {1}, {&out, &out2}, {0, 1}).ok);
  EXPECT_NE(last_misuse().find("indices are not 0"), std::string::npos) << last_misuse();
  EXPECT_TRUE(m->unload(kQoS).ok);
}

TEST_F(AneDriverMisuse, TooSmallOrUnevenSurfacesAnswerStatus0x1d) {
  auto m = loaded_model();
  Surface small(prog.inputs.alloc_bytes / 2);
  CallResult r = m->evaluate(kQoS, {&small}, {0}, {&out, &out2}, {0, 1});  // below the chip's minimum (C7)
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("status=0x1d"), std::string::npos) << r.error;
  EXPECT_EQ(framework_error(Phase::Evaluate, "conv", r.error, compiler::default_chip(), 1).status(),
            DriverStatus::BadSurfaces);
  Surface wide(prog.outputs.alloc_bytes + 4096);
  r = m->evaluate(kQoS, {&in}, {0}, {&out, &wide}, {0, 1});  // outputs of two sizes (C5)
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("status=0x1d"), std::string::npos) << r.error;
  EXPECT_EQ(last_misuse(), "");  // the hardware's answer, not a misuse
  EXPECT_TRUE(m->unload(kQoS).ok);
}

TEST_F(AneDriverMisuse, CompilesPastTheBudgetFailSilently) {
  if (fake.compiles() != 0) GTEST_SKIP() << "needs a process of its own: the budget is the process's (as ctest runs it)";
  auto driver = make_ane_driver({});
  const int budget = compiler::default_chip().compile_budget;
  while (fake.compiles() < budget) (void)driver->compile(prog.mil_text, prog.weights, "conv");
  try {
    (void)driver->compile(prog.mil_text, prog.weights, "conv");
    FAIL() << "compile #" << budget + 1 << " should fail";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), DriverStatus::CompileFailed);
    EXPECT_NE(std::string(e.what()).find("C9"), std::string::npos) << e.what();
  }
  EXPECT_EQ(last_misuse(), "");  // silent: NO without an error, and not a misuse
}

// What the driver hard-codes cannot be changed through its interface: a client of the fake's classes
// commits each of these instead.
TEST_F(AneDriverMisuse, ValuesTheDriverHardCodesAreCheckedToo) {
  const std::pair<const char*, const char*> cases[] = {
      {"plist", "the options plist is not nil"},
      {"mil_string", "the MIL text is not NSData"},
      {"options", "the options are not an empty dictionary"},
      {"weights_buffer", "weightsBuffer is not nil"},
      {"perf_stats", "perfStats is not nil"},
      {"procedure", "the procedure index is not @0"},
      {"surface_shape", "not a flat buffer"},
  };
  for (const auto& [which, expected] : cases) {
    const std::string got = fake.probe(which, "", 0, 0);
    EXPECT_NE(got.find(expected), std::string::npos) << which << ": " << got;
  }
}

// The driver makes a new request (and new surface objects) at each load — ADriverRunCommitsNone…
// shows it across unload/load; a client that keeps one across a reload is refused.
TEST_F(AneDriverMisuse, ARequestKeptAcrossAReloadIsRefused) {
  ir::Graph g("relu");
  g.add_output("y", g.add_node(ir::Op::Relu, {g.input("x", {ElemType::F16, {1, 64, 1, 384}})}, {}, "y"));
  const compiler::CompiledProgram relu = compiler::emit_mil(g, compiler::default_chip());
  const std::string got =
      fake.probe("request_reuse", relu.mil_text.c_str(), size_t(relu.inputs.alloc_bytes), size_t(relu.outputs.alloc_bytes));
  EXPECT_NE(got.find("a request made for another load of a model"), std::string::npos) << got;
}

TEST_F(AneDriverMisuse, SurfaceMemoryFaultsOutsideALock) {
  void* s = fake.create_surface(4096);
  ASSERT_NE(s, nullptr);
  auto* bytes = static_cast<volatile uint8_t*>(fake.base_address(s));
  ASSERT_EQ(fake.lock(s, 0, nullptr), 0);
  bytes[0] = 7;  // locked: fine
  ASSERT_EQ(fake.unlock(s, 0, nullptr), 0);
  EXPECT_DEATH(bytes[1] = 8, "");
  ASSERT_EQ(fake.lock(s, 1, nullptr), 0);  // read-only lock: reads, no writes
  EXPECT_EQ(bytes[0], 7);
  EXPECT_DEATH(bytes[2] = 9, "");
  ASSERT_EQ(fake.unlock(s, 1, nullptr), 0);
}

}  // namespace
}  // namespace orion::runtime::ane
