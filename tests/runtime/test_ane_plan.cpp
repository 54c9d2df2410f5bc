// The Apple driver's shared C++ (runtime/ane/ane_plan.h, ane_core.h): everything it hands the
// private framework and how it reads the answers, tested here with a fake framework, since only
// the Objective-C calls of ane_driver.mm need a Mac. Suites carry "anesim" so `ctest -R anesim`
// runs them with the rest of the ANE-runtime work.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/file.h"
#include "compiler/mil/emit_mil.h"
#include "runtime/ane/ane_core.h"
#include "runtime/ane/ane_driver.h"
#include "runtime/ane/ane_plan.h"
#include "runtime/compile_budget.h"
#include "support.h"

namespace orion::runtime::ane {
namespace {

namespace fs = std::filesystem;
using ir::ElemType;
using ir::Op;
using ir::Value;

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Inputs declared (zeta, alpha) and outputs declared (y, b_out): alphabetical order is the reverse
// of the declared one on both sides (C6). One BLOBFILE weight "w".
compiler::CompiledProgram two_io_program() {
  ir::Graph g("two_io");
  Value z = g.input("zeta", {ElemType::F16, {1, 64, 1, 16}});   // 2048 bytes
  Value a = g.input("alpha", {ElemType::F16, {1, 32, 1, 16}});  // 1024 bytes
  std::vector<float> w(32 * 64);
  for (size_t i = 0; i < w.size(); i++) w[i] = 0.01f * float(i % 17);
  Value wc = g.constant_f32("w", {32, 64, 1, 1}, w);
  Value c = g.add_node(Op::Conv1x1, {z, wc}, {}, "proj");
  g.add_output("y", g.add_node(Op::Add, {c, a}, {}, "sum"));
  g.add_output("b_out", g.add_node(Op::Relu, {c}, {}, "act"));
  return compiler::emit_mil(g, compiler::default_chip());
}

compiler::CompiledProgram weight_free_program() {
  ir::Graph g("weight_free");
  Value x = g.input("x", {ElemType::F16, {1, 64, 1, 16}});
  g.add_output("y", g.add_node(Op::Relu, {x}, {}, "y"));
  return compiler::emit_mil(g, compiler::default_chip());
}

template <typename F>
DriverError driver_error(F&& f) {
  try {
    f();
  } catch (const DriverError& e) {
    return e;
  }
  ADD_FAILURE() << "no DriverError thrown";
  return DriverError(DriverStatus::EvalFailed, "none");
}

// ---- weight dictionary ------------------------------------------------------------------------------

TEST(AnePlan_anesim, WeightEntriesKeepKeysAndPointAtTheImages) {
  WeightDict d{{"@model_path/weights/wq.bin", bytes_of("QQ")},
               {"@model_path/weights/b.bin", bytes_of("B")},
               {"@model_path/weights/layer0/wk.bin", bytes_of("K")}};
  auto e = plan_weight_entries(d, "p");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].key, "@model_path/weights/b.bin");  // key order
  EXPECT_EQ(e[0].relative_path, "weights/b.bin");
  EXPECT_EQ(e[1].relative_path, "weights/layer0/wk.bin");
  EXPECT_EQ(e[2].key, "@model_path/weights/wq.bin");
  for (const WeightEntry& x : e) {
    EXPECT_EQ(x.offset, 0u);  // {offset: 0, data: <whole file image>}
    EXPECT_EQ(x.data, &d.at(x.key));
  }
  EXPECT_TRUE(plan_weight_entries({}, "p").empty());  // C19: an empty dictionary, not an error
  EXPECT_STREQ(kWeightOffsetKey, "offset");
  EXPECT_STREQ(kWeightDataKey, "data");
  EXPECT_EQ(kQoS, 21u);
}

TEST(AnePlan_anesim, WeightKeysThatLeaveTheWeightsFolderAreRefused) {
  for (const std::string& key : std::vector<std::string>{"weights/w.bin", "@model_path/w.bin", "@model_path/weights/",
                                                         "@model_path/weights/../model.mil", "@model_path/weights//w.bin",
                                                         "@model_path/weights/./w.bin", "@model_path/weights/a\\b.bin",
                                                         std::string("@model_path/weights/a\0b.bin", 27)}) {
    DriverError e = driver_error([&] { plan_weight_entries({{key, bytes_of("x")}}, "prog"); });
    EXPECT_EQ(e.status(), DriverStatus::CompileFailed) << key;
    EXPECT_NE(std::string(e.what()).find("prog"), std::string::npos) << e.what();
    EXPECT_FALSE(e.context().hint.empty());
  }
}

// ---- MIL text ----------------------------------------------------------------------------------------

TEST(AnePlan_anesim, MilTextMustBeUtf8) {
  EXPECT_EQ(first_invalid_utf8("program(1.3) // caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("ab\xff"), 2u);             // never a lead byte
  EXPECT_EQ(first_invalid_utf8("a\x80"), 1u);              // stray continuation
  EXPECT_EQ(first_invalid_utf8("abc\xc0\xaf"), 3u);        // overlong '/'
  EXPECT_EQ(first_invalid_utf8("\xed\xa0\x80"), 0u);       // UTF-16 surrogate
  EXPECT_EQ(first_invalid_utf8("x\xf4\x90\x80\x80"), 1u);  // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("xy\xe2\x82"), 2u);         // truncated at the end
  EXPECT_EQ(first_invalid_utf8("\xe2\x28\xa1"), 0u);       // bad continuation
  DriverError e = driver_error([] { check_mil_utf8("program(1.3)\n\xfe", "k"); });
  EXPECT_EQ(e.status(), DriverStatus::CompileFailed);
  EXPECT_NE(std::string(e.what()).find("byte 13"), std::string::npos) << e.what();
  EXPECT_NO_THROW(check_mil_utf8(two_io_program().mil_text, "k"));
}

// ---- bindings (C6) -----------------------------------------------------------------------------

TEST(AnePlan_anesim, BindingsAreAlphabeticalWhateverTheDeclaredOrder) {
  auto prog = two_io_program();
  const auto& chip = compiler::default_chip();
  IoPlan io = plan_io(prog.mil_text, prog.weights, chip, "two_io");
  EXPECT_EQ(io.inputs.names(), (std::vector<std::string>{"alpha", "zeta"}));
  EXPECT_EQ(io.outputs.names(), (std::vector<std::string>{"b_out", "y"}));
  EXPECT_EQ(request_indices(io.inputs), (std::vector<int>{0, 1}));
  EXPECT_EQ(request_indices(io.outputs), (std::vector<int>{0, 1}));
  // declared zeta (0) → binding 1, alpha (1) → binding 0; same for y / b_out.
  EXPECT_EQ(declared_to_binding(io.inputs), (std::vector<int>{1, 0}));
  EXPECT_EQ(declared_to_binding(io.outputs), (std::vector<int>{1, 0}));
  // C13/C5/C7: one allocation per side, raised to the chip minimum.
  EXPECT_EQ(io.inputs.alloc_bytes, chip.min_buffer_bytes);
  EXPECT_EQ(io.inputs.bindings[1].bytes, 2048);
  EXPECT_EQ(io.inputs.bindings[0].bytes, 1024);
}

TEST(AnePlan_anesim, UnparsableMilIsACompileFailureWithALine) {
  DriverError e =
      driver_error([] { plan_io("program(1.3)\n{\n  func main<ios18>(\n", {}, compiler::default_chip(), "bad"); });
  EXPECT_EQ(e.status(), DriverStatus::CompileFailed);
  EXPECT_NE(std::string(e.what()).find("line"), std::string::npos) << e.what();
  auto prog = two_io_program();  // a BLOBFILE without its weight file
  EXPECT_EQ(driver_error([&] { plan_io(prog.mil_text, {}, compiler::default_chip(), "p"); }).status(),
            DriverStatus::CompileFailed);
}

// ---- surfaces ------------------------------------------------------------------------------------

TEST(AnePlan_anesim, SurfacesAreFlatByteBuffers) {
  SurfaceSpec s = surface_spec(49152);
  EXPECT_EQ(s.width, 49152);
  EXPECT_EQ(s.height, 1);
  EXPECT_EQ(s.bytes_per_element, 1);
  EXPECT_EQ(s.bytes_per_row, 49152);
  EXPECT_EQ(s.alloc_size, 49152);
  EXPECT_EQ(s.pixel_format, 0u);
  EXPECT_EQ(surface_spec(98304).width, 98304);
}

TEST(AnePlan_anesim, SurfaceRulesAreCheckedBeforeTheHardware) {
  auto prog = two_io_program();
  compiler::ChipProfile chip = compiler::default_chip();
  IoPlan io = plan_io(prog.mil_text, prog.weights, chip, "two_io");
  const size_t m = size_t(chip.min_buffer_bytes);
  EXPECT_NO_THROW(check_surfaces(io, {m, m}, {m, m}, chip, "two_io"));
  EXPECT_NO_THROW(check_surfaces(io, {2 * m, 2 * m}, {m, m}, chip, "two_io"));  // larger is fine (C14)

  auto expect = [&](std::vector<size_t> in, std::vector<size_t> out, const std::string& needle) {
    DriverError e = driver_error([&] { check_surfaces(io, in, out, chip, "two_io"); });
    EXPECT_EQ(e.status(), DriverStatus::BadSurfaces) << needle;
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_FALSE(e.context().hint.empty());
  };
  expect({m, m + 64}, {m, m}, "C13");      // inputs not uniform
  expect({m, m}, {m + 64, m}, "C5");       // outputs not uniform
  expect({m - 64, m - 64}, {m, m}, "C7");  // below the minimum
  expect({m}, {m, m}, "1 input surfaces for 2 inputs");

  // C14: a buffer must hold the packed data; with a (hypothetical) tiny minimum, zeta's 2048 bytes
  // do not fit a 1024-byte surface.
  chip.min_buffer_bytes = 1024;
  DriverError e = driver_error([&] { check_surfaces(io, {1024, 1024}, {1024, 1024}, chip, "two_io"); });
  EXPECT_EQ(e.status(), DriverStatus::BadSurfaces);
  EXPECT_NE(std::string(e.what()).find("'zeta'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("C14"), std::string::npos) << e.what();
}

// ---- statuses ------------------------------------------------------------------------------------

TEST(AnePlan_anesim, HardwareStatusIsReadFromTheFrameworkText) {
  const std::string real =
      "Error Domain=com.apple.appleneuralengine Code=8 \"ANEProgramProcessRequestDirect() Failed with "
      "status=0x1d : statusType=0x9: Program Inference error\"";
  EXPECT_EQ(parse_status(real), 0x1du);
  EXPECT_EQ(parse_status("Failed with status=0x1D"), 0x1du);
  EXPECT_EQ(parse_status("statusType=0x9: Program Inference error"), std::nullopt);  // not a status
  EXPECT_EQ(parse_status("status=0x"), std::nullopt);
  EXPECT_EQ(parse_status("compile failed"), std::nullopt);
  EXPECT_EQ(parse_status("xstatus=0x1d"), std::nullopt);

  EXPECT_EQ(status_for(Phase::Evaluate, 0x1d), DriverStatus::BadSurfaces);
  EXPECT_EQ(status_for(Phase::Evaluate, 0x2), DriverStatus::EvalFailed);
  EXPECT_EQ(status_for(Phase::Evaluate, std::nullopt), DriverStatus::EvalFailed);
  EXPECT_EQ(status_for(Phase::Compile, std::nullopt), DriverStatus::CompileFailed);
  EXPECT_EQ(status_for(Phase::Load, std::nullopt), DriverStatus::LoadFailed);
  EXPECT_EQ(status_for(Phase::Unload, std::nullopt), DriverStatus::LoadFailed);
}

TEST(AnePlan_anesim, FrameworkFailuresBecomeDriverErrorsWithHints) {
  const auto& chip = compiler::default_chip();
  DriverError bad = framework_error(Phase::Evaluate, "k", "Failed with status=0x1d : statusType=0x9", chip, 3);
  EXPECT_EQ(bad.status(), DriverStatus::BadSurfaces);
  EXPECT_NE(std::string(bad.what()).find("0x1d"), std::string::npos);
  EXPECT_NE(bad.context().hint.find(std::to_string(chip.min_buffer_bytes)), std::string::npos) << bad.context().hint;

  DriverError over = framework_error(Phase::Compile, "k", "", chip, chip.compile_budget);
  EXPECT_EQ(over.status(), DriverStatus::CompileFailed);
  EXPECT_NE(std::string(over.what()).find("C9"), std::string::npos) << over.what();
  EXPECT_NE(std::string(over.what()).find("without an error description"), std::string::npos) << over.what();

  DriverError under = framework_error(Phase::Compile, "k", "ANECCompile() FAILED", chip, 5);
  EXPECT_EQ(under.status(), DriverStatus::CompileFailed);
  EXPECT_EQ(std::string(under.what()).find("C9"), std::string::npos) << under.what();
  EXPECT_NE(std::string(under.what()).find("ANECCompile() FAILED"), std::string::npos);

  EXPECT_EQ(framework_error(Phase::Load, "k", "x", chip, 0).status(), DriverStatus::LoadFailed);
  EXPECT_EQ(framework_error(Phase::Evaluate, "k", "x", chip, 0).status(), DriverStatus::EvalFailed);
  EXPECT_EQ(framework_error(Phase::Evaluate, "k", "x", chip, 0).kind(), ErrorKind::Runtime);
}

// ---- not on this platform ------------------------------------------------------------------------

#ifndef __APPLE__
TEST(AnePlan_anesim, AneDriverIsNotAvailableOffMacOS) {
  DriverError direct = driver_error([] { make_ane_driver({}); });
  EXPECT_EQ(direct.status(), DriverStatus::NotAvailable);
  EXPECT_NE(std::string(direct.what()).find("not available on this platform"), std::string::npos) << direct.what();
  EXPECT_NE(direct.context().hint.find("anesim"), std::string::npos) << direct.context().hint;

  DriverError named = driver_error([] { make_driver("ane"); });  // through the registry
  EXPECT_EQ(named.status(), DriverStatus::NotAvailable);
  EXPECT_NE(std::string(named.what()).find("not available on this platform"), std::string::npos) << named.what();
  EXPECT_NE(named.context().hint.find("anesim"), std::string::npos) << named.context().hint;
}
#endif

// ---- AneDriver over a fake framework ---------------------------------------------------------------

struct FakeLog {
  std::vector<std::string> calls;                     // "compile 21", "load 21", ...
  std::vector<std::string> models_created;            // MIL text of each create_model
  std::vector<fs::path> folders;                      // <tmp>/<hex> of each create_model
  std::vector<std::vector<std::string>> weight_keys;  // per create_model
  std::vector<std::vector<uint64_t>> weight_offsets;
  int load_failures = 0;                  // the next N loads fail
  std::string compile_error, eval_error;  // non-empty: that call fails with this text
  bool refuse_model = false;
  std::vector<const Surface*> last_inputs, last_outputs;
  std::vector<int> last_input_indices, last_output_indices;
};

class FakeModel final : public FrameworkModel {
 public:
  FakeModel(FakeLog& log, std::string hex, std::string folder, std::string compiled)
      : log_(log), hex_(std::move(hex)), folder_(std::move(folder)), compiled_(std::move(compiled)) {}
  std::string hex_identifier() override { return hex_; }
  // Like the framework, a compile leaves the compiled model's `data` file in the model folder: here
  // a tag and every weight file image.
  CallResult compile(unsigned qos) override {
    log_.calls.push_back("compile " + std::to_string(qos));
    if (!log_.compile_error.empty()) return CallResult::failure(log_.compile_error);
    std::ofstream(folder_ + "/data", std::ios::binary) << compiled_;
    return {};
  }
  CallResult load(unsigned qos) override {
    log_.calls.push_back("load " + std::to_string(qos));
    if (log_.load_failures > 0) {
      log_.load_failures--;
      return CallResult::failure("no free program slot");
    }
    return {};
  }
  CallResult unload(unsigned qos) override {
    log_.calls.push_back("unload " + std::to_string(qos));
    return {};
  }
  CallResult evaluate(unsigned qos, const std::vector<Surface*>& in, const std::vector<int>& in_idx,
                      const std::vector<Surface*>& out, const std::vector<int>& out_idx) override {
    log_.calls.push_back("evaluate " + std::to_string(qos));
    log_.last_inputs.assign(in.begin(), in.end());
    log_.last_outputs.assign(out.begin(), out.end());
    log_.last_input_indices = in_idx;
    log_.last_output_indices = out_idx;
    return log_.eval_error.empty() ? CallResult{} : CallResult::failure(log_.eval_error);
  }

 private:
  FakeLog& log_;
  std::string hex_, folder_, compiled_;
};

class FakeFramework final : public Framework {
 public:
  FakeFramework(FakeLog& log, std::string tmp) : log_(log), tmp_(std::move(tmp)) {}
  std::unique_ptr<FrameworkModel> create_model(const std::string& mil, const std::vector<WeightEntry>& w) override {
    log_.calls.push_back("create_model");
    if (log_.refuse_model) return nullptr;
    log_.models_created.push_back(mil);
    std::vector<std::string> keys;
    std::vector<uint64_t> offsets;
    for (const WeightEntry& e : w) {
      keys.push_back(e.key);
      offsets.push_back(e.offset);
    }
    log_.weight_keys.push_back(keys);
    log_.weight_offsets.push_back(offsets);
    // Like the framework: the identifier is a function of the program, text and weights (same
    // program → same folder).
    std::string program = mil, compiled = "compiled:";
    for (const WeightEntry& e : w) {
      program += e.key + std::string(e.data->begin(), e.data->end());
      compiled += std::string(e.data->begin(), e.data->end());
    }
    const std::string hex = fmt::format("{:016X}", std::hash<std::string>{}(program));
    log_.folders.push_back(tmp_ + "/" + hex);
    return std::make_unique<FakeModel>(log_, hex, tmp_ + "/" + hex, compiled);
  }
  std::string temp_dir() override { return tmp_; }

 private:
  FakeLog& log_;
  std::string tmp_;
};

// The program's text, as the driver hands it to the framework: with the model's salt (kModelSaltKey)
// added to its buildInfo, which this takes out again.
std::string without_salt(const std::string& model_mil) {
  const size_t at = model_mil.find(fmt::format("{{\"{}\", \"", kModelSaltKey));
  if (at == std::string::npos) return model_mil;
  return model_mil.substr(0, at) + model_mil.substr(model_mil.find("}, ", at) + 3);
}

struct FakeDriver {
  FakeLog log;
  std::string tmp = test::temp_dir();
  AneDriver driver;
  explicit FakeDriver(const DriverOptions& o = {}) : driver(std::make_unique<FakeFramework>(log, tmp), o) {}
};

TEST(AneDriver_anesim, CompileWritesTheModelFolderAndCompilesAtQoS21) {
  FakeDriver f;
  auto prog = two_io_program();
  auto p = f.driver.compile(prog.mil_text, prog.weights, "two_io");
  EXPECT_EQ(f.log.calls, (std::vector<std::string>{"create_model", "compile 21"}));
  ASSERT_EQ(f.log.models_created.size(), 1u);
  EXPECT_NE(f.log.models_created[0], prog.mil_text);  // salted: a model of its own
  EXPECT_EQ(without_salt(f.log.models_created[0]), prog.mil_text);
  EXPECT_EQ(f.log.weight_keys[0], (std::vector<std::string>{"@model_path/weights/w.bin"}));
  EXPECT_EQ(f.log.weight_offsets[0], (std::vector<uint64_t>{0}));
  EXPECT_EQ(p->input_names(), (std::vector<std::string>{"alpha", "zeta"}));
  EXPECT_EQ(p->output_names(), (std::vector<std::string>{"b_out", "y"}));
  EXPECT_FALSE(p->loaded());
  EXPECT_EQ(f.driver.counters().compiles, 1);
  EXPECT_EQ(f.driver.name(), "ane");

  // <tmp>/<hex>/model.mil and weights/w.bin, byte for byte.
  std::vector<fs::path> dirs(fs::directory_iterator(f.tmp), fs::directory_iterator{});
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(read_all((dirs[0] / "model.mil").string()), f.log.models_created[0]);
  const auto& image = prog.weights.at("@model_path/weights/w.bin");
  EXPECT_EQ(read_all((dirs[0] / "weights" / "w.bin").string()), std::string(image.begin(), image.end()));

  p.reset();  // never loaded: no unload; the folder goes with the program
  EXPECT_EQ(f.log.calls.back(), "compile 21");
  EXPECT_FALSE(fs::exists(dirs[0]));
}

TEST(AneDriver_anesim, WeightFreeProgramGetsAnEmptyDictionary) {
  FakeDriver f;
  auto prog = weight_free_program();
  ASSERT_TRUE(prog.weights.empty());
  auto p = f.driver.compile(prog.mil_text, prog.weights, "weight_free");
  ASSERT_EQ(f.log.weight_keys.size(), 1u);
  EXPECT_TRUE(f.log.weight_keys[0].empty());
}

TEST(AneDriver_anesim, NonUtf8OrUnparsableMilNeverReachesTheFramework) {
  FakeDriver f;
  auto prog = weight_free_program();
  std::string bad = prog.mil_text + "\xff";
  EXPECT_EQ(driver_error([&] { f.driver.compile(bad, {}, "k"); }).status(), DriverStatus::CompileFailed);
  EXPECT_EQ(driver_error([&] { f.driver.compile("program(1.3)\n{", {}, "k"); }).status(), DriverStatus::CompileFailed);
  EXPECT_TRUE(f.log.calls.empty());
  EXPECT_EQ(f.driver.counters().compiles, 0);
}

TEST(AneDriver_anesim, CompileFailurePastTheBudgetNamesC9AndCleansUp) {
  compiler::ChipProfile chip = compiler::default_chip();
  chip.compile_budget = 2;
  FakeDriver f({.chip = &chip});
  auto prog = weight_free_program();
  auto p1 = f.driver.compile(prog.mil_text, {}, "a");
  f.log.compile_error = "ANECCompile() FAILED";
  DriverError e1 = driver_error([&] { f.driver.compile(prog.mil_text, {}, "b"); });
  EXPECT_EQ(e1.status(), DriverStatus::CompileFailed);
  EXPECT_NE(std::string(e1.what()).find("C9"), std::string::npos) << e1.what();  // 2nd compile: at the budget
  EXPECT_EQ(f.driver.counters().compiles, 2);
  EXPECT_EQ(f.driver.counters().failed_compiles, 1);
  // The failed compile shared p1's folder (same text, same identifier): it must still be there.
  EXPECT_EQ(std::distance(fs::directory_iterator(f.tmp), fs::directory_iterator{}), 1);
  p1.reset();
  EXPECT_EQ(std::distance(fs::directory_iterator(f.tmp), fs::directory_iterator{}), 0);

  f.log.refuse_model = true;
  EXPECT_EQ(driver_error([&] { f.driver.compile(prog.mil_text, {}, "c"); }).status(), DriverStatus::CompileFailed);
  EXPECT_EQ(f.driver.counters().failed_compiles, 2);
}

// The budget is the process's: every driver of the process shares the framework connection, and
// a driver made after others starts from their compiles.
TEST(AneDriver_anesim, CompileCountIsTheProcesssNotTheDrivers) {
  compiler::ChipProfile chip = compiler::default_chip();
  chip.compile_budget = 3;
  FakeLog log;
  const std::string tmp = test::temp_dir();
  auto connection = std::make_shared<FakeFramework>(log, tmp);
  AneDriver a(connection, {.chip = &chip});
  auto prog = weight_free_program();
  auto p1 = a.compile(prog.mil_text, {}, "a1");
  auto p2 = a.compile(prog.mil_text, {}, "a2");
  AneDriver b(connection, {.chip = &chip});
  EXPECT_EQ(b.counters().compiles, 2);
  EXPECT_EQ(CompileBudget::for_driver(b).used(), 2);
  log.compile_error = "ANECCompile() FAILED";
  DriverError e = driver_error([&] { b.compile(prog.mil_text, {}, "b1"); });
  EXPECT_NE(std::string(e.what()).find("compiled 3 programs, at or past the m4 budget of ~3 (C9)"), std::string::npos)
      << e.what();
  EXPECT_EQ(a.counters().compiles, 3);  // the first driver sees the second's compile
  EXPECT_EQ(b.counters().failed_compiles, 1);
  EXPECT_EQ(a.counters().failed_compiles, 0);
}

// The delta reload (C10): a new model for the new weights, in its own folder with model.mil, the
// weight files and the compiled `data` file patched with the new values, loaded without a compile.
// The identifier is a function of what the framework is handed, and the driver salts every model's
// text: identical programs get folders of their own, and the reload of one leaves the other's alone.
TEST(AneDriver_anesim, DeltaReloadLoadsANewModelFromThePatchedDataFile) {
  FakeDriver f;
  auto prog = two_io_program();
  auto p1 = f.driver.compile(prog.mil_text, prog.weights, "first");
  auto p2 = f.driver.compile(prog.mil_text, prog.weights, "second");
  std::vector<fs::path> dirs(fs::directory_iterator(f.tmp), fs::directory_iterator{});
  ASSERT_EQ(dirs.size(), 2u);
  ASSERT_EQ(f.log.folders.size(), 2u);
  const fs::path first = f.log.folders[0], shared = f.log.folders[1];  // the second program's
  const std::string original = read_all((shared / "weights" / "w.bin").string());
  WeightDict changed = prog.weights;
  std::vector<uint8_t>& image = changed.begin()->second;
  for (size_t i = image.size() - 64; i < image.size(); i++) image[i] ^= 0x01;  // the last values of w
  f.driver.load(*p1);
  f.log.calls.clear();
  f.driver.replace_weight_files(*p1, changed);
  EXPECT_EQ(f.log.calls, (std::vector<std::string>{"unload 21", "create_model"}));
  EXPECT_FALSE(p1->loaded());
  f.driver.load(*p1);
  EXPECT_EQ(f.log.calls.back(), "load 21");  // no compile
  EXPECT_EQ(std::count(f.log.calls.begin(), f.log.calls.end(), "compile 21"), 0);

  EXPECT_EQ(read_all((shared / "weights" / "w.bin").string()), original) << "the second program's folder is untouched";
  EXPECT_FALSE(fs::exists(first)) << "the first program's old folder goes with its old model";
  ASSERT_EQ(f.log.folders.size(), 3u);
  const fs::path fresh = f.log.folders[2];
  EXPECT_EQ(read_all((fresh / "model.mil").string()), f.log.models_created[2]);
  EXPECT_EQ(without_salt(f.log.models_created[2]), prog.mil_text);
  EXPECT_NE(f.log.models_created[2], f.log.models_created[0]);
  EXPECT_EQ(read_all((fresh / "weights" / "w.bin").string()), std::string(image.begin(), image.end()));
  EXPECT_EQ(read_all((fresh / "data").string()), "compiled:" + std::string(image.begin(), image.end()));
  p2.reset();  // the shared folder's last user
  EXPECT_FALSE(fs::exists(shared));
  p1.reset();
  EXPECT_FALSE(fs::exists(fresh));
}

TEST(AneDriver_anesim, LoadIsRetriedOnceThenFails) {
  FakeDriver f;
  auto prog = weight_free_program();
  auto p = f.driver.compile(prog.mil_text, {}, "k");
  f.log.load_failures = 1;
  f.driver.load(*p);
  EXPECT_TRUE(p->loaded());
  EXPECT_EQ(f.driver.counters().loads, 1);
  f.driver.unload(*p);
  EXPECT_FALSE(p->loaded());
  f.log.load_failures = 2;
  DriverError e = driver_error([&] { f.driver.load(*p); });
  EXPECT_EQ(e.status(), DriverStatus::LoadFailed);
  EXPECT_NE(std::string(e.what()).find("no free program slot"), std::string::npos);
  EXPECT_FALSE(p->loaded());
  EXPECT_EQ(f.log.calls, (std::vector<std::string>{"create_model", "compile 21", "load 21", "load 21", "unload 21",
                                                   "load 21", "load 21"}));
}

TEST(AneDriver_anesim, EvaluateChecksSurfacesThenBindsInAlphabeticalOrder) {
  FakeDriver f;
  auto prog = two_io_program();
  auto p = f.driver.compile(prog.mil_text, prog.weights, "two_io");
  const size_t m = size_t(f.driver.chip().min_buffer_bytes);
  Surface alpha(m), zeta(m), b_out(m), y(m), odd(m + 64);

  EXPECT_EQ(driver_error([&] {
              f.driver.evaluate(*p, {&alpha, &zeta}, {&b_out, &y});
            }).status(),
            DriverStatus::EvalFailed);  // not loaded
  f.driver.load(*p);
  EXPECT_EQ(driver_error([&] {
              f.driver.evaluate(*p, {&alpha, &odd}, {&b_out, &y});
            }).status(),
            DriverStatus::BadSurfaces);  // C13, refused before the hardware
  EXPECT_EQ(std::count(f.log.calls.begin(), f.log.calls.end(), "evaluate 21"), 0);

  f.driver.evaluate(*p, {&alpha, &zeta}, {&b_out, &y});
  EXPECT_EQ(f.log.calls.back(), "evaluate 21");
  EXPECT_EQ(f.log.last_inputs, (std::vector<const Surface*>{&alpha, &zeta}));
  EXPECT_EQ(f.log.last_outputs, (std::vector<const Surface*>{&b_out, &y}));
  EXPECT_EQ(f.log.last_input_indices, (std::vector<int>{0, 1}));
  EXPECT_EQ(f.log.last_output_indices, (std::vector<int>{0, 1}));
  EXPECT_EQ(f.driver.counters().evaluations, 1);

  f.log.eval_error = "ANEProgramProcessRequestDirect() Failed with status=0x1d : statusType=0x9: Program Inference error";
  EXPECT_EQ(driver_error([&] { f.driver.evaluate(*p, {&alpha, &zeta}, {&b_out, &y}); }).status(), DriverStatus::BadSurfaces);
  f.log.eval_error = "Failed with status=0x3";
  EXPECT_EQ(driver_error([&] { f.driver.evaluate(*p, {&alpha, &zeta}, {&b_out, &y}); }).status(), DriverStatus::EvalFailed);
  EXPECT_EQ(f.driver.counters().evaluations, 1);

  p.reset();  // destroyed while loaded: unloaded
  EXPECT_EQ(f.log.calls.back(), "unload 21");
}

TEST(AneDriver_anesim, DeltaReloadRefusesUnknownFilesAndUnpatchableData) {
  FakeDriver f;
  auto prog = two_io_program();
  auto p = f.driver.compile(prog.mil_text, prog.weights, "two_io");
  std::vector<fs::path> dirs(fs::directory_iterator(f.tmp), fs::directory_iterator{});
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_THROW(f.driver.replace_weight_files(*p, {{"@model_path/weights/other.bin", bytes_of("x")}}), Error);
  EXPECT_FALSE(fs::exists(dirs[0] / "weights" / "other.bin"));
  // A data file without the current values (the compiled layout is not a copy of them): refused,
  // so the caller falls back to another update strategy.
  std::ofstream(dirs[0] / "data", std::ios::binary) << "compiled: something else";
  WeightDict changed = prog.weights;
  changed.begin()->second.back() ^= 0x01;
  DriverError e = driver_error([&] { f.driver.replace_weight_files(*p, changed); });
  EXPECT_EQ(e.status(), DriverStatus::LoadFailed);
  EXPECT_NE(std::string(e.what()).find("cannot patch weight '@model_path/weights/w.bin'"), std::string::npos)
      << e.what();
  fs::remove(dirs[0] / "data");
  e = driver_error([&] { f.driver.replace_weight_files(*p, changed); });
  EXPECT_NE(std::string(e.what()).find("no compiled data file"), std::string::npos) << e.what();
}

TEST(AneDriver_anesim, ProgramsOfAnotherDriverAreRefused) {
  FakeDriver f, g;
  auto prog = weight_free_program();
  auto p = f.driver.compile(prog.mil_text, {}, "k");
  try {
    g.driver.load(*p);
    FAIL() << "expected an error";
  } catch (const DriverError&) {
    FAIL() << "expected a usage error, not a driver error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
  }
}

}  // namespace
}  // namespace orion::runtime::ane
