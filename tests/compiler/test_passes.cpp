// Compiler passes and the pipeline.
//
// Golden tests: every tests/testdata/compiler/passes/<pass>/<case>.ir is parsed, the pass named by
// the folder runs once, and the result must equal <case>.expected.ir exactly: the canonical IR text
// (ir/text.h), preceded by one comment line per diagnostic ("// warning C20 at 'node': ...") and,
// when the pass set one, the SRAM estimate ("// sram-estimate: N bytes"). A case whose input is
// invalid has <case>.expected.err instead: the exact error line. A second run of the pass must
// report no change and leave the text as it was.
//
// An input may start with directive comments: "// chip: m1" picks the chip profile.
//
// To regenerate the expected files on purpose (then review the diff before committing):
//   ORION_UPDATE_GOLDEN=1 ./build/tests/compiler_test_passes
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/error.h"
#include "compiler/pass.h"
#include "compiler/pipeline.h"
#include "ir/text.h"
#include "support.h"

namespace orion::compiler {
namespace {
namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

bool updating_goldens() {
  const char* env = std::getenv("ORION_UPDATE_GOLDEN");
  return env && std::string(env) == "1";
}

std::string diagnostics_text(const PassContext& ctx) {
  std::string out;
  for (const Diagnostic& d : ctx.diagnostics)
    out += fmt::format("// {} {} at '{}': {}\n", d.level == Diagnostic::Level::Error ? "error" : "warning",
                       d.rule.empty() ? "-" : d.rule, d.node, d.message);
  if (ctx.sram_estimate_bytes) out += fmt::format("// sram-estimate: {} bytes\n", ctx.sram_estimate_bytes);
  return out;
}

// "// chip: m1" anywhere in the input's leading comments.
void apply_directives(const std::string& input, PassContext& ctx) {
  std::istringstream lines(input);
  for (std::string line; std::getline(lines, line) && line.rfind("//", 0) == 0;)
    if (line.rfind("// chip: ", 0) == 0) ctx.chip = &chip_profile(line.substr(9));
}

struct GoldenCase {
  std::string pass;   // the folder name
  fs::path input;     // <case>.ir
  std::string label;  // "<pass>/<case>" for messages and the test name
};

std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> cases;
  fs::path root = test::data_path("compiler/passes");
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(root, ec)) {
    if (!dir.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(dir.path())) {
      std::string file = f.path().filename().string();
      if (!file.ends_with(".ir") || file.ends_with(".expected.ir")) continue;
      std::string pass = dir.path().filename().string();
      cases.push_back({pass, f.path(), pass + "/" + file.substr(0, file.size() - 3)});
    }
  }
  std::sort(cases.begin(), cases.end(), [](auto& a, auto& b) { return a.label < b.label; });
  return cases;
}

class PassGolden : public testing::TestWithParam<GoldenCase> {};

TEST_P(PassGolden, MatchesExpectedText) {
  const GoldenCase& c = GetParam();
  fs::path stem = c.input;
  stem.replace_extension();
  fs::path expected_ir = stem.string() + ".expected.ir", expected_err = stem.string() + ".expected.err";
  std::string input = read_text(c.input);
  PassContext ctx;
  apply_directives(input, ctx);
  std::string actual, actual_err;
  bool changed = false;
  ir::Graph g;
  try {
    g = ir::parse_graph(input, c.label + ".ir");
    changed = make_pass(c.pass)->run(g, ctx);
    ASSERT_EQ(g.verify(), "") << "the pass left an invalid graph";
    actual = diagnostics_text(ctx) + ir::print_graph(g);
  } catch (const Error& e) {
    actual_err = std::string(e.what()) + "\n";
  }
  if (updating_goldens()) {
    fs::remove(actual_err.empty() ? expected_err : expected_ir);
    write_text(actual_err.empty() ? expected_ir : expected_err, actual_err.empty() ? actual : actual_err);
    GTEST_SKIP() << "updated the expected file of " << c.label;
  }
  if (fs::exists(expected_err)) {
    EXPECT_EQ(actual_err, read_text(expected_err));
    return;
  }
  ASSERT_EQ(actual_err, "") << "unexpected error";
  ASSERT_TRUE(fs::exists(expected_ir)) << expected_ir << " is missing (ORION_UPDATE_GOLDEN=1 writes it)";
  std::string expected = read_text(expected_ir);
  EXPECT_EQ(actual, expected);
  // The pass said it changed the graph exactly when the text changed.
  bool text_changed = ir::print_graph(ir::parse_graph(input)) != ir::print_graph(g);
  EXPECT_EQ(changed, text_changed);
  // Fixed point: a second run has nothing to do.
  EXPECT_FALSE(make_pass(c.pass)->run(g, ctx)) << c.pass << " changed the graph again";
  EXPECT_EQ(diagnostics_text(ctx) + ir::print_graph(g), expected);
}

std::string case_name(const testing::TestParamInfo<GoldenCase>& info) {
  std::string n = info.param.label;
  for (char& ch : n)
    if (!std::isalnum(uint8_t(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Golden, PassGolden, testing::ValuesIn(golden_cases()), case_name);

// Every registered pass needs golden cases (docs/adding-a-pass.md).
TEST(PassGoldenFiles, EveryRegisteredPassHasCases) {
  auto cases = golden_cases();
  for (const std::string& pass : pass_names()) {
    int n = int(std::count_if(cases.begin(), cases.end(), [&](const GoldenCase& c) { return c.pass == pass; }));
    EXPECT_GE(n, 2) << "pass " << pass << " needs golden cases in tests/testdata/compiler/passes/" << pass;
  }
  for (const GoldenCase& c : cases) EXPECT_NO_THROW(make_pass(c.pass)) << "folder " << c.pass << " names no registered pass";
}

}  // namespace
}  // namespace orion::compiler
