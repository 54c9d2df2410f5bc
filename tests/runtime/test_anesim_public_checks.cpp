// anesim's checks from the public definitions rather than from our compiler: program and opset
// versions per chip (C18), MIL text that is not UTF-8 (C19), sdpa run with its mask ignored as the
// hardware does (C15), the op-signature table — and every program the compiler emits for every
// chip, for generation and training, passes all of them.
#include <gtest/gtest.h>

#include <cmath>

#include "anesim_test_util.h"
#include "compiler/blob/blob_file.h"
#include "ir/interpret.h"
#include "model/config.h"
#include "model/frontends/program_set.h"
#include "runtime/anesim/blobfile_check.h"
#include "runtime/anesim/mil_scan.h"
#include "runtime/anesim/mil_signatures.h"

namespace orion::runtime::anesim {
namespace {

using compiler::chip_profile;

std::string refusal(const std::string& text, const WeightDict& w, const std::string& chip = "m4") {
  DriverOptions o;
  o.chip = &chip_profile(chip);
  try {
    make_anesim_driver(o)->compile(text, w, "p");
    return "";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), DriverStatus::CompileFailed);
    return e.what();
  }
}

compiler::CompiledProgram relu_program(const std::string& chip) {
  ir::Graph g("relu");
  g.add_output("y", g.add_node(ir::Op::Relu, {g.input("x", {ir::ElemType::F16, {1, 768, 1, 32}})}, {}, "y"));
  return compiler::compile_graph(g, chip_profile(chip)).program;
}

TEST(anesim_PublicChecks, ProgramVersionsPairWithTheirOpsetsAndChips) {
  for (const std::string& chip : compiler::chip_names()) {
    const compiler::ChipProfile& c = chip_profile(chip);
    EXPECT_EQ(version_problem(c.program_version, c.function_target, c), "") << chip;  // what the emitter writes
  }
  const compiler::ChipProfile &m1 = chip_profile("m1"), &m4 = chip_profile("m4"), &m5 = chip_profile("m5");
  EXPECT_NE(version_problem("1.3", "ios16", m4).find("carries opsets ios18, not func main<ios16>"), std::string::npos);
  EXPECT_NE(version_problem("1.0", "ios18", m4).find("not func main<ios18>"), std::string::npos);
  EXPECT_NE(version_problem("1.5", "ios18", m4).find("newer than m4"), std::string::npos);
  EXPECT_EQ(version_problem("1.5", "ios18", m5), "");
  EXPECT_EQ(version_problem("1.0", "ios16", m4), "");  // an older program still runs on a newer chip
  EXPECT_EQ(version_problem("1.0", "ios15", m1), "");
  EXPECT_NE(version_problem("1.0", "ios17", m1).find("opset ios17 is newer than m1"), std::string::npos);
  EXPECT_NE(version_problem("2.0", "ios18", m5).find("not a MIL program version"), std::string::npos);
}

TEST(anesim_PublicChecks, CompileRefusesAProgramVersionWithAnotherOpset) {
  compiler::CompiledProgram p = relu_program("m4");
  ASSERT_EQ(refusal(p.mil_text, p.weights), "");
  std::string text = p.mil_text;
  text.replace(text.find("main<ios18>"), 11, "main<ios16>");
  const std::string m = refusal(text, p.weights);
  EXPECT_NE(m.find("program(1.3) carries opsets ios18, not func main<ios16> (C18)"), std::string::npos) << m;
  // M1's own program runs on M4; M4's does not run on M1.
  EXPECT_EQ(refusal(relu_program("m1").mil_text, {}, "m4"), "");
  EXPECT_NE(refusal(p.mil_text, {}, "m1").find("newer than m1"), std::string::npos);
}

TEST(anesim_PublicChecks, TextThatIsNotUtf8IsRefused) {
  compiler::CompiledProgram p = relu_program("m4");
  std::string text = p.mil_text;
  const size_t at = text.find("coremltools-version");
  ASSERT_NE(at, std::string::npos);
  text[at + 2] = char(0xFF);  // inside a string of buildInfo: the parser alone would not mind
  const std::string m = refusal(text, p.weights);
  EXPECT_NE(m.find("not UTF-8"), std::string::npos) << m;
  EXPECT_NE(m.find("0xff"), std::string::npos) << m;
}

TEST(anesim_PublicChecks, SignaturesRefuseWrongInputsConstnessTypesAndOpsets) {
  const std::string head = "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1, 768, 1, 32]> x, tensor<int32, [1, 768, 1, 32]> i) {\n";
  auto problems = [&](const std::string& body) {
    std::vector<std::string> p = signature_problems(scan_mil(head + body + "    } -> (y);\n}\n", "t.mil"));
    return p.empty() ? std::string() : p.front();
  };
  auto expect_problem = [&](const std::string& body, const std::string& needle) {
    const std::string p = problems(body);
    EXPECT_NE(p.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << p;
  };
  EXPECT_EQ(problems("        tensor<fp16, [1, 768, 1, 32]> y = relu(x = x)[name = string(\"y\")];\n"), "");
  expect_problem("        tensor<fp16, [1, 768, 1, 32]> y = relu(input = x)[name = string(\"y\")];\n",
                 "relu has no input 'input' in ios18");
  expect_problem("        tensor<fp16, [1, 768, 1, 32]> y = add(x = x)[name = string(\"y\")];\n",
                 "required input 'y' is missing");
  expect_problem("        tensor<fp16, [1, 768, 1, 32]> y = add(x = x, y = i)[name = string(\"y\")];\n",
                 "input 'y' is int32, another input of its type is fp16");
  expect_problem("        tensor<int32, [1, 768, 1, 32]> y = relu(x = i)[name = string(\"y\")];\n",
                 "input 'x' is int32 ('i'); the op takes fp16, fp32");
  expect_problem("        int32 ax = const()[name = string(\"ax\"), val = int32(1)];\n"
                     "        int32 ax2 = identity(x = ax)[name = string(\"ax2\")];\n"
                     "        tensor<fp16, [1, 768, 1, 32]> y = softmax(axis = ax2, x = x)[name = string(\"y\")];\n",
                 "input 'axis' must be a const ('ax2' is made by identity)");
  expect_problem("        tensor<fp16, [1, 768, 1, 32]> y = relu(x = z)[name = string(\"y\")];\n",
                 "reads 'z', which is not defined before it");
  expect_problem("        tensor<fp16, [1, 768, 1, 32]> y = gelu(x = x)[name = string(\"y\")];\n",
                 "op 'gelu' is not in opset ios18");
  // sdpa exists from iOS18 on only.
  const std::vector<std::string> ios16 = ops_of_opset("ios16"), ios18 = ops_of_opset("ios18");
  EXPECT_EQ(std::count(ios16.begin(), ios16.end(), "scaled_dot_product_attention"), 0);
  EXPECT_EQ(std::count(ios18.begin(), ios18.end(), "scaled_dot_product_attention"), 1);
  EXPECT_EQ(ios18.size(), ios16.size() + 1);
}

// q, k, v: [1, 768, 1, 32] inputs seen as [1, H=4, S=32, D=192]; a causal mask as a BLOBFILE
// constant. The hardware ignores the mask (C15): the result is plain softmax(QKᵀ/√D)·V.
std::string sdpa_text(bool with_mask) {
  return std::string(R"(program(1.3)
{
    func main<ios18>(tensor<fp16, [1, 768, 1, 32]> k, tensor<fp16, [1, 768, 1, 32]> q, tensor<fp16, [1, 768, 1, 32]> v) {
        tensor<int32, [4]> hs = const()[name = string("hs"), val = tensor<int32, [4]>([1, 4, 32, 192])];
        tensor<int32, [4]> flat = const()[name = string("flat"), val = tensor<int32, [4]>([1, 768, 1, 32])];
        tensor<fp16, [1, 4, 32, 192]> qh = reshape(shape = hs, x = q)[name = string("qh")];
        tensor<fp16, [1, 4, 32, 192]> kh = reshape(shape = hs, x = k)[name = string("kh")];
        tensor<fp16, [1, 4, 32, 192]> vh = reshape(shape = hs, x = v)[name = string("vh")];
        tensor<fp16, [1, 1, 32, 32]> mask = const()[name = string("mask"), val = tensor<fp16, [1, 1, 32, 32]>(BLOBFILE(path = string("@model_path/weights/mask.bin"), offset = uint64(64)))];
)") + (with_mask ? "        tensor<fp16, [1, 4, 32, 192]> att = scaled_dot_product_attention(attn_mask = mask, key = kh, query = qh, value = vh)[name = string(\"att\")];\n"
                 : "        tensor<fp16, [1, 4, 32, 192]> att = scaled_dot_product_attention(key = kh, query = qh, value = vh)[name = string(\"att\")];\n") +
         R"(        tensor<fp16, [1, 768, 1, 32]> y = reshape(shape = flat, x = att)[name = string("y")];
    } -> (y);
}
)";
}

TEST(anesim_PublicChecks, SdpaRunsWithItsMaskIgnoredAsTheHardwareDoes) {
  std::vector<uint16_t> mask(32 * 32);
  for (int i = 0; i < 32; i++)
    for (int j = 0; j < 32; j++) mask[size_t(i * 32 + j)] = j > i ? 0xFC00 : 0;  // −inf above the diagonal
  compiler::blob::BlobIn b{compiler::blob::BlobDType::F16, reinterpret_cast<const uint8_t*>(mask.data()), mask.size() * 2};
  const WeightDict w = {{"@model_path/weights/mask.bin", compiler::blob::write_blob_file({b})}};
  auto d = make_anesim_driver();
  auto masked = d->compile(sdpa_text(true), w, "sdpa_masked");
  auto plain = d->compile(sdpa_text(false), w, "sdpa");
  d->load(*masked), d->load(*plain);
  const std::vector<int64_t> shape = {1, 768, 1, 32};
  ir::Tensor32 k = test::random_t(shape, 1, 0.5f), q = test::random_t(shape, 2, 0.5f), v = test::random_t(shape, 3);
  auto run = [&](DriverProgram& p) {
    auto in = test::make_surfaces(3, 49152), out = test::make_surfaces(1, 49152);
    in.s[0].write_f32(k.data.data(), k.data.size());  // bound alphabetically: k, q, v (C6)
    in.s[1].write_f32(q.data.data(), q.data.size());
    in.s[2].write_f32(v.data.data(), v.data.size());
    d->evaluate(p, in.ptrs(), out.ptrs());
    return test::read_surface(out.s[0], shape);
  };
  const ir::Tensor32 y_masked = run(*masked), y_plain = run(*plain);
  EXPECT_EQ(y_masked.data, y_plain.data) << "the mask must change nothing";
  // And the result is attention without the mask — which a causal mask would have changed.
  auto heads = [](const ir::Tensor32& t) {
    ir::Tensor32 h({1, 4, 32, 192});
    h.data = t.data;
    return h;
  };
  ir::Tensor32 qh = heads(q), kh = heads(k), vh = heads(v), m({1, 1, 32, 32});
  for (size_t i = 0; i < m.data.size(); i++) m.data[i] = mask[i] ? -INFINITY : 0.0f;
  const std::vector<ir::Type> result = {{ir::ElemType::F32, {1, 4, 32, 192}}};
  const ir::Tensor32 ref = ir::eval_op(ir::Op::Attention, {&qh, &kh, &vh}, {}, result, "ref").at(0);
  const ir::Tensor32 causal = ir::eval_op(ir::Op::Attention, {&qh, &kh, &vh, &m}, {}, result, "causal").at(0);
  double err = 0, causal_diff = 0;
  for (size_t i = 0; i < ref.data.size(); i++) {
    err = std::max(err, double(std::fabs(ref.data[i] - y_plain.data[i])));
    causal_diff = std::max(causal_diff, double(std::fabs(causal.data[i] - y_plain.data[i])));
  }
  EXPECT_LT(err, 2e-2);
  EXPECT_GT(causal_diff, 0.1);
  // On M1/M2 (opset ios16) there is no sdpa at all.
  DriverOptions o;
  o.chip = &chip_profile("m1");
  std::string m1_text = sdpa_text(true);
  m1_text.replace(0, 12, "program(1.0)").replace(m1_text.find("ios18"), 5, "ios16");
  EXPECT_NE(refusal(m1_text, w, "m1").find("'scaled_dot_product_attention' is not in opset ios16"), std::string::npos);
}

// Every program generation (one row's decode and batched decode's wider buckets) and training
// use, for every chip, as the compiler emits it: it must pass every public-definition check
// anesim makes (versions, signatures, blobs).
TEST(anesim_PublicChecks, EveryEmittedProgramOfEveryChipPasses) {
  int checked = 0;
  for (const std::string model : {"stories260k", "gpt2-tiny"}) {
    const ModelWeights w = random_weights(config_preset(model), 7);
    for (const std::string& chip_name : compiler::chip_names()) {
      const compiler::ChipProfile& chip = chip_profile(chip_name);
      std::vector<frontends::ProgramSpec> programs;
      const int attention_min = frontends::inference_attention_bucket(w, chip);
      if (attention_min > 0)
        for (int slot : {0, 1}) {  // with the programs of decode batches of up to 40 rows (32, 64), mixing adapters
          auto p = frontends::inference_programs(w, 20, attention_min, chip, slot, 40, slot > 0 ? 3 : 0);
          programs.insert(programs.end(), p.begin(), p.end());
        }
      const frontends::TrainingBuckets tb = frontends::training_buckets(w, 32, chip);
      if (tb.attention > 0 && tb.ffn > 0) {
        auto p = frontends::training_programs(w, tb);
        programs.insert(programs.end(), p.begin(), p.end());
      }
      ASSERT_FALSE(programs.empty()) << model << " " << chip_name;
      for (const frontends::ProgramSpec& spec : programs) {
        SCOPED_TRACE(model + " " + chip_name + " " + spec.name);
        ir::Graph g = spec.build();
        const compiler::CompiledProgram p = compiler::compile_graph(g, chip).program;
        const MilScan m = scan_mil(p.mil_text, spec.name);
        EXPECT_EQ(version_problem(m.program_version, m.function_target, chip), "");
        const std::vector<std::string> problems = signature_problems(m);
        EXPECT_TRUE(problems.empty()) << problems.front();
        EXPECT_NO_THROW(check_blobfile_constants(p.mil_text, p.weights, spec.name));
        checked++;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace orion::runtime::anesim
