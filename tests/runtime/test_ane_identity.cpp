// Every model the Apple driver makes has an identity of its own (kModelSaltKey, ane_plan.h): the
// framework names a model — and its folder under the user's temporary directory — by hashes of its
// MIL text, weights and options, so the driver salts the MIL text's buildInfo, which the hardware
// never reads. These tests run on every machine; tests/ane_driver/test_processes.cpp runs two
// processes through the real driver against the fake framework.
#include <gtest/gtest.h>

#include <unistd.h>

#include <regex>

#include "compiler/mil/emit_mil.h"
#include "runtime/ane/ane_framework.h"
#include "runtime/ane/ane_plan.h"

namespace orion::runtime::ane {
namespace {

using ir::ElemType;

compiler::CompiledProgram relu_program() {
  ir::Graph g("relu");
  g.add_output("y", g.add_node(ir::Op::Relu, {g.input("x", {ElemType::F16, {1, 64, 1, 16}})}, {}, "y"));
  return compiler::emit_mil(g, compiler::default_chip());
}

// The names and sizes a program binds, as the driver reads them from its text.
std::string bindings_of(const std::string& mil) {
  IoPlan io = plan_io(mil, {}, compiler::default_chip(), "relu");
  std::string out;
  for (const auto& b : io.inputs.bindings) out += "in " + b.name + " " + std::to_string(b.bytes) + ";";
  for (const auto& b : io.outputs.bindings) out += "out " + b.name + " " + std::to_string(b.bytes) + ";";
  return out;
}

TEST(AneIdentity_anesim, TheSaltJoinsTheBuildInfoAndChangesNothingElse) {
  const std::string mil = relu_program().mil_text;
  const std::string salted = with_build_info_entry(mil, kModelSaltKey, "42-abc-1");
  EXPECT_NE(salted, mil);
  EXPECT_NE(salted.find(R"([buildInfo = dict<string, string>({{"orion-model", "42-abc-1"}, {"coremlc-component-MIL")"),
            std::string::npos)
      << salted;
  // Only the buildInfo line differs, and the program binds and parses as before.
  EXPECT_EQ(salted.substr(salted.find("\n{\n")), mil.substr(mil.find("\n{\n")));
  EXPECT_EQ(bindings_of(salted), bindings_of(mil));
  EXPECT_FALSE(first_invalid_utf8(salted).has_value());
}

TEST(AneIdentity_anesim, AnEmptyOrMissingBuildInfoGetsTheSaltToo) {
  const std::string mil = relu_program().mil_text;
  const size_t line = mil.find("[buildInfo"), end = mil.find('\n', line);
  const std::string none = mil.substr(0, line) + mil.substr(end + 1);
  const std::string empty = mil.substr(0, line) + "[buildInfo = dict<string, string>({})]" + mil.substr(end);

  const std::string want = R"([buildInfo = dict<string, string>({{"orion-model", "s"}})])";
  for (const std::string& text : {none, empty}) {
    const std::string salted = with_build_info_entry(text, kModelSaltKey, "s");
    EXPECT_NE(salted.find("program(1.3)\n" + want + "\n{\n"), std::string::npos) << salted;
    EXPECT_EQ(bindings_of(salted), bindings_of(mil));
  }
  EXPECT_EQ(with_build_info_entry("not a program", kModelSaltKey, "s"), "not a program");
}

// The salt is the process's (its id and 64 random bits: a process id may be reused, or shared by
// processes of two containers over one temporary folder) and, by a count, the model's.
TEST(AneIdentity_anesim, SaltsAreThisProcesssAndEachModelsOwn) {
  EXPECT_EQ(&process_salt(), &process_salt());
  std::smatch m;
  ASSERT_TRUE(std::regex_match(process_salt(), m, std::regex("([0-9]+)-[0-9a-f]{16}"))) << process_salt();
  EXPECT_EQ(std::stol(m[1].str()), static_cast<long>(getpid()));

  struct NoFramework final : Framework {
    std::unique_ptr<FrameworkModel> create_model(const std::string&, const std::vector<WeightEntry>&) override {
      return nullptr;
    }
    std::string temp_dir() override { return "/tmp"; }
  } connection;
  const std::string a = connection.next_model_salt(), b = connection.next_model_salt();
  EXPECT_NE(a, b);
  EXPECT_EQ(a, process_salt() + "-1");
  EXPECT_EQ(b, process_salt() + "-2");
}

}  // namespace
}  // namespace orion::runtime::ane
