// Two processes of one user compiling the same program — `orion serve` beside `orion train`, or two
// test processes — through the real driver against the fake framework. The framework names a model
// by hashes of what it is handed and keeps it under <the user's temporary folder>/<that name>, for
// every process of the user (the fake derives and keeps it the same way). Unless the driver makes
// each model its own (kModelSaltKey), the second process's delta reload and its end remove or
// rewrite the folder and compiled model the first one loads from, and the first one's next load
// fails or computes with the other's weights.
#include <gtest/gtest.h>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "anesim_reference.h"
#include "compiler/mil/emit_mil.h"
#include "fake_framework_env.h"
#include "runtime/ane/ane_driver.h"

namespace orion::runtime::ane {
namespace {

using ir::ElemType;
using ir::Value;

// Set in the environment of the second process, which is this test program run again.
constexpr const char* kOtherProcessEnv = "ORION_TEST_ANE_OTHER_PROCESS";
bool is_other_process() { return std::getenv(kOtherProcessEnv) != nullptr; }

// x [1, 64, 1, 384] → conv 1×1 with weight "w" (values times `scale`) → "shared_out": the same
// program in both processes (no per-process scale), and no other test's.
compiler::CompiledProgram shared_program(float scale) {
  ir::Graph g("shared");
  Value x = g.input("x", {ElemType::F16, {1, 64, 1, 384}});
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); i++) w[i] = scale * 0.01f * float(i % 11);
  g.add_output("shared_out", g.add_node(ir::Op::Conv1x1, {x, g.constant_f32("w", {64, 64, 1, 1}, w)}, {}, "proj"));
  return compiler::emit_mil(g, compiler::default_chip());
}

std::vector<uint8_t> run(Driver& driver, DriverProgram& p, const compiler::CompiledProgram& prog) {
  Surface x = test::input_of(prog), y(prog.outputs.alloc_bytes);
  driver.evaluate(p, {&x}, {&y});
  return {y.data(), y.data() + y.alloc_bytes()};
}

// Runs TheOtherProcess in a process of its own and returns its exit status (0: it passed).
int run_other_process() {
  char self[PATH_MAX] = {};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return -1;
  const std::string command = std::string(kOtherProcessEnv) + "=1 '" + self +
                              "' --gtest_filter=AneDriverProcesses.TheOtherProcess >&2";
  return std::system(command.c_str());
}

TEST(AneDriverProcesses, ADeltaReloadInAnotherProcessLeavesThisOnesProgramAlone) {
  ORION_REQUIRE_FAKE_FRAMEWORK();
  if (is_other_process()) GTEST_SKIP() << "this is the other process";
  const auto one = shared_program(1.0f), three = shared_program(3.0f);
  ASSERT_NE(test::fresh_output(one), test::fresh_output(three));
  auto driver = make_ane_driver({});
  auto p = driver->compile(one.mil_text, one.weights, "shared");
  driver->load(*p);
  ASSERT_EQ(run(*driver, *p, one), test::fresh_output(one));

  // The other process compiles the same program, reloads it with other weights and ends.
  ASSERT_EQ(run_other_process(), 0) << "the other process failed (its output is above)";

  EXPECT_EQ(run(*driver, *p, one), test::fresh_output(one)) << "still loaded";
  driver->unload(*p);
  driver->load(*p);  // loads the compiled model kept under its identifier again
  EXPECT_EQ(run(*driver, *p, one), test::fresh_output(one)) << "the other process's reload changed this one's model";
  driver->replace_weight_files(*p, three.weights);  // this process's own delta reload still works
  driver->load(*p);
  EXPECT_EQ(run(*driver, *p, three), test::fresh_output(three));
}

// The other process of the test above (skipped when ctest runs it on its own).
TEST(AneDriverProcesses, TheOtherProcess) {
  ORION_REQUIRE_FAKE_FRAMEWORK();
  if (!is_other_process()) GTEST_SKIP() << "started by ADeltaReloadInAnotherProcessLeavesThisOnesProgramAlone";
  const auto one = shared_program(1.0f), two = shared_program(2.0f);
  auto driver = make_ane_driver({});
  auto p = driver->compile(one.mil_text, one.weights, "shared");
  driver->load(*p);
  EXPECT_EQ(run(*driver, *p, one), test::fresh_output(one));
  driver->replace_weight_files(*p, two.weights);
  driver->load(*p);
  EXPECT_EQ(run(*driver, *p, two), test::fresh_output(two));
}  // the program goes, as at the end of a process, and its folders with it

}  // namespace
}  // namespace orion::runtime::ane
