// MIL emitter: golden text, chip syntaxes (C18), blobs at record offsets (C8), named bool
// transpose flags (C3), binding tables (C5/C6/C7/C13), refusals, and emit → parse → emit identity
// for every test graph on every chip profile.
//
// Golden files: tests/testdata/compiler/mil/<graph>_<chip>.mil. They change only on purpose:
//   ORION_UPDATE_GOLDEN=1 ./build/tests/compiler_test_mil   (then review the diff and commit it)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/dtype.h"
#include "base/error.h"
#include "compiler/blob/blob_file.h"
#include "compiler/mil/emit_mil.h"
#include "compiler/mil/mil_syntax.h"
#include "compiler/mil/parse_mil.h"
#include "mil_test_graphs.h"
#include "support.h"

namespace orion::compiler {
namespace {

namespace tg = test_graphs;
using ir::ElemType;
using ir::Op;

std::string read_text(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool updating_goldens() {
  const char* env = std::getenv("ORION_UPDATE_GOLDEN");
  return env && std::string(env) == "1";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string emit_error(const ir::Graph& g, const std::string& chip) {
  try {
    emit_mil(g, chip_profile(chip));
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(MilEmit, GoldenText) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"linear", "m4"}, {"linear", "m1"}, {"norm_attention", "m4"}, {"every_op", "m5"}, {"cast_fp32", "m3"}};
  for (const auto& [graph, chip] : cases) {
    ir::Graph g;
    for (auto& ng : tg::all())
      if (ng.name == graph) g = ng.make();
    std::string text = emit_mil(g, chip_profile(chip)).mil_text;
    std::string path = test::data_path("compiler/mil/" + graph + "_" + chip + ".mil");
    if (updating_goldens()) {
      std::filesystem::create_directories(std::filesystem::path(path).parent_path());
      std::ofstream(path, std::ios::binary) << text;
    }
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing; run with ORION_UPDATE_GOLDEN=1";
    EXPECT_EQ(text, read_text(path)) << graph << " on " << chip
                                     << " differs from its golden file; if intended, regenerate with ORION_UPDATE_GOLDEN=1";
  }
}

TEST(MilEmit, ChipProfileChoosesHeaderAndLiteralSyntax) {
  ir::Graph g = tg::norm_attention();
  std::string m4 = emit_mil(g, chip_profile("m4")).mil_text;
  EXPECT_EQ(m4.rfind("program(1.3)\n[buildInfo = dict<string, string>({", 0), 0u) << m4;
  EXPECT_TRUE(contains(m4, "    func main<ios18>(tensor<fp16, [1, 64, 1, 16]> x, tensor<fp16, [1, 4, 16, 16]> k) {\n"));
  EXPECT_TRUE(contains(m4, "        fp16 eps = const()[name = string(\"eps\"), val = fp16(0.00001)];\n")) << m4;
  EXPECT_TRUE(contains(m4, "    } -> (probs, normed);\n}\n"));
  std::string m1 = emit_mil(g, chip_profile("m1")).mil_text;
  EXPECT_EQ(m1.rfind("program(1.0)\n", 0), 0u);
  EXPECT_TRUE(contains(m1, "func main<ios16>("));
  EXPECT_TRUE(contains(m1, "tensor<fp16, []> eps = const()[name = string(\"eps\"), val = tensor<fp16, []>(0.00001)];"));
  EXPECT_TRUE(contains(m1, "tensor<bool, []> scores_transpose_x = const()"));
  EXPECT_EQ(emit_mil(g, chip_profile("m5")).mil_text.rfind("program(1.5)\n", 0), 0u);
}

TEST(MilEmit, ConvParametersAndMatmulFlagsAreNamedConsts) {
  std::string t = emit_mil(tg::norm_attention(), default_chip()).mil_text;
  EXPECT_TRUE(
      contains(t,
               "        tensor<fp16, [1, 64, 1, 16]> q = conv(dilations = q_dilations, groups = q_groups, pad = q_pad, "
               "pad_type = q_pad_type, strides = q_strides, weight = wq, x = xn)[name = string(\"q\")];\n"))
      << t;
  EXPECT_TRUE(contains(t, "string q_pad_type = const()[name = string(\"q_pad_type\"), val = string(\"valid\")];"));
  EXPECT_TRUE(
      contains(t, "tensor<int32, [4]> q_pad = const()[name = string(\"q_pad\"), val = tensor<int32, [4]>([0, 0, 0, 0])];"));
  // C3: transpose flags are bool consts declared before the matmul, never literals in the call.
  EXPECT_TRUE(contains(t, "bool scores_transpose_y = const()[name = string(\"scores_transpose_y\"), val = bool(true)];"));
  EXPECT_TRUE(
      contains(t, "scores = matmul(transpose_x = scores_transpose_x, transpose_y = scores_transpose_y, x = qt, y = k)"));
  EXPECT_LT(t.find("bool scores_transpose_y"), t.find("= matmul("));
  // Outputs named differently from their nodes are identity statements with the output's name.
  EXPECT_TRUE(contains(t, "tensor<fp16, [1, 4, 16, 16]> probs = identity(x = sm)[name = string(\"probs\")];"));
}

TEST(MilEmit, WeightsAreBlobFilesWhoseOffsetsNameRecords) {
  ir::Graph g = tg::linear();
  CompiledProgram p = emit_mil(g, default_chip());
  ASSERT_EQ(p.weights.size(), 2u);
  EXPECT_EQ(p.blob_constants, 2);
  EXPECT_EQ(p.inline_constants, 0);
  EXPECT_EQ(p.parameter_constants, 5);  // conv: dilations, groups, pad, pad_type, strides
  EXPECT_TRUE(contains(p.mil_text,
                       "tensor<fp16, [32, 64, 1, 1]> w = const()[name = string(\"w\"), val = tensor<fp16, [32, 64, 1, 1]>"
                       "(BLOBFILE(path = string(\"@model_path/weights/w.bin\"), offset = uint64(64)))];"));
  const auto& img = p.weights.at("@model_path/weights/w.bin");
  blob::BlobFile f(img, "w.bin");
  const blob::BlobEntry& e = f.at(64);  // C8
  EXPECT_EQ(e.dtype, blob::BlobDType::F16);
  EXPECT_EQ(f.copy(e), g.node(g.find("w")).data->bytes);
  // One file for all weights: records one after another, offsets 64 and 64 + 64 + 4096.
  EmitOptions single;
  single.weight_files = EmitOptions::WeightFiles::Single;
  CompiledProgram s = emit_mil(g, default_chip(), single);
  ASSERT_EQ(s.weights.size(), 1u);
  EXPECT_TRUE(contains(s.mil_text, "BLOBFILE(path = string(\"@model_path/weights/weight.bin\"), offset = uint64(64))"));
  EXPECT_TRUE(contains(s.mil_text, "BLOBFILE(path = string(\"@model_path/weights/weight.bin\"), offset = uint64(4224))"));
  // M5: 128-byte alignment of the data; the records stay where the storage reader walks to (the
  // first right after the header, the next at the previous data's end rounded up to 64).
  CompiledProgram m5 = emit_mil(g, chip_profile("m5"), single);
  blob::BlobFile f5(m5.weights.begin()->second, "weight.bin");
  for (const auto& en : f5.entries()) EXPECT_EQ(en.data_offset % 128, 0u);
  EXPECT_TRUE(contains(m5.mil_text, "BLOBFILE(path = string(\"@model_path/weights/weight.bin\"), offset = uint64(64))"));
  EXPECT_TRUE(contains(m5.mil_text, "BLOBFILE(path = string(\"@model_path/weights/weight.bin\"), offset = uint64(4224))"));
  EXPECT_EQ(f5.at(4224).data_offset, 4352u);
}

TEST(MilEmit, WeightFreeProgramHasAnEmptyDictionary) {
  ir::Graph g("relu");
  g.add_output("y", g.add_node(Op::Relu, {g.input("x", {ElemType::F16, {1, 768, 1, 16}})}, {}, "y"));
  CompiledProgram p = emit_mil(g, default_chip());
  EXPECT_TRUE(p.weights.empty());  // C19: empty, not absent
  EXPECT_EQ(p.blob_constants, 0);
}

TEST(MilEmit, SaveProgramWritesModelMilAndWeights) {
  CompiledProgram p = emit_mil(tg::linear(), default_chip());
  std::string dir = test::temp_dir() + "/linear";
  save_program(p, dir);
  EXPECT_EQ(read_text(dir + "/model.mil"), p.mil_text);
  EXPECT_EQ(read_text(dir + "/weights/w.bin"),
            std::string(p.weights.at("@model_path/weights/w.bin").begin(), p.weights.at("@model_path/weights/w.bin").end()));
  EXPECT_TRUE(std::filesystem::exists(dir + "/weights/b.bin"));
}

TEST(MilEmit, DeterministicBytes) {
  for (const auto& ng : tg::all()) {
    CompiledProgram a = emit_mil(ng.make(), default_chip()), b = emit_mil(ng.make(), default_chip());
    EXPECT_EQ(a.mil_text, b.mil_text) << ng.name;
    EXPECT_EQ(a.weights, b.weights) << ng.name;
  }
}

TEST(MilEmit, BindingTablesAreAlphabeticalWithUniformSizes) {
  // Declared order z_big, a_small, m_mid; the hardware binds a_small, m_mid, z_big (C6).
  ir::Graph g("bind");
  auto z = g.input("z_big", {ElemType::F16, {1, 768, 1, 64}});   // 98304 bytes
  auto a = g.input("a_small", {ElemType::F16, {1, 16, 1, 16}});  // 512 bytes
  auto m = g.input("m_mid", {ElemType::F16, {1, 100, 1, 300}});  // 60000 bytes
  g.add_output("out_z", g.add_node(Op::Relu, {z}, {}, "out_z"));
  g.add_output("out_a", g.add_node(Op::Relu, {a}, {}, "out_a"));
  g.add_output("Out_m", g.add_node(Op::Relu, {m}, {}, "Out_m"));
  CompiledProgram p = emit_mil(g, default_chip());
  EXPECT_EQ(p.inputs.names(), (std::vector<std::string>{"a_small", "m_mid", "z_big"}));
  EXPECT_EQ(p.outputs.names(), (std::vector<std::string>{"Out_m", "out_a", "out_z"}));  // byte order: 'O' < 'o'
  EXPECT_EQ(p.inputs.bindings[0].bytes, 512);
  EXPECT_EQ(p.inputs.bindings[0].declared_index, 1);
  EXPECT_EQ(p.inputs.bindings[2].declared_index, 0);
  EXPECT_EQ(p.inputs.alloc_bytes, 98304);  // C13: all inputs as large as the largest
  for (const Binding& b : p.inputs.bindings) EXPECT_EQ(b.alloc_bytes, 98304);
  EXPECT_EQ(p.outputs.find("out_a")->alloc_bytes, 98304);  // C5
  EXPECT_EQ(p.inputs.find("m_mid")->type.shape[3], 300);
  // C7: a small program still gets minimum-size buffers; M5 rounds to 128 bytes.
  std::vector<std::pair<std::string, ir::Type>> small = {{"x", {ElemType::F16, {1, 8, 1, 16}}}};
  EXPECT_EQ(make_binding_table(small, chip_profile("m4")).alloc_bytes, 49152);
  std::vector<std::pair<std::string, ir::Type>> odd = {{"x", {ElemType::F16, {1, 25000, 1, 1}}},
                                                       {"y", {ElemType::F16, {1, 3, 1, 1}}}};
  EXPECT_EQ(make_binding_table(odd, chip_profile("m5")).alloc_bytes, 50048);  // 50000 → multiple of 128
  EXPECT_EQ(make_binding_table(odd, chip_profile("m4")).alloc_bytes, 50048);  // and of 64
}

TEST(MilEmit, CompositeOpsNeedLegalizeAne) {
  ir::Graph g;
  auto x = g.input("x", {ElemType::F16, {1, 8, 1, 16}});
  g.add_output("y", g.add_node(Op::Gelu, {x}, {}, "act"));
  std::string m = emit_error(g, "m4");
  EXPECT_TRUE(contains(m, "'act'")) << m;
  EXPECT_TRUE(contains(m, "gelu has no MIL form; run legalize-ane")) << m;
  ir::Graph n;
  n.add_output("y", n.add_node(Op::Neg, {n.input("x", {ElemType::F16, {1, 8, 1, 16}})}, {}, "minus"));
  EXPECT_TRUE(contains(emit_error(n, "m4"), "'minus'"));
}

TEST(MilEmit, CastIsRefusedOnM1AndM2) {
  ir::Graph g = tg::cast_fp32();
  for (const char* chip : {"m1", "m2"}) {
    std::string m = emit_error(g, chip);
    EXPECT_TRUE(contains(m, "C18")) << m;
    EXPECT_TRUE(contains(m, "'xf'")) << m;
  }
  EXPECT_EQ(emit_error(g, "m3"), "");
}

TEST(MilEmit, NameCollisionsAreErrors) {
  ir::Graph g;
  auto x = g.input("x", {ElemType::F16, {1, 8, 1, 16}});
  g.add_node(Op::Relu, {x}, {}, "y");
  g.add_output("y", x);  // output "y" would need an identity named y, but node y exists
  EXPECT_TRUE(contains(emit_error(g, "m4"), "defined twice"));
}

TEST(MilRoundTrip, EmitParseEmitIsIdenticalOnEveryChip) {
  for (const auto& ng : tg::all())
    for (const std::string& chip : chip_names()) {
      const ChipProfile& prof = chip_profile(chip);
      if (ng.uses_cast && !prof.supports_cast) continue;
      for (auto files : {EmitOptions::WeightFiles::PerConstant, EmitOptions::WeightFiles::Single}) {
        EmitOptions opt;
        opt.weight_files = files;
        SCOPED_TRACE(ng.name + " on " + chip + (files == EmitOptions::WeightFiles::Single ? " (one weight file)" : ""));
        CompiledProgram p1 = emit_mil(ng.make(), prof, opt);
        ParsedMil parsed = parse_mil_program(p1.mil_text, p1.weights, "model.mil");
        EXPECT_EQ(parsed.graph.verify(), "");
        EXPECT_EQ(parsed.program_version, prof.program_version);
        EXPECT_EQ(parsed.function_target, prof.function_target);
        CompiledProgram p2 = emit_mil(parsed.graph, prof, opt);
        EXPECT_EQ(p1.mil_text, p2.mil_text);
        EXPECT_EQ(p1.weights, p2.weights);
        EXPECT_EQ(p1.inputs.names(), p2.inputs.names());
        EXPECT_EQ(p1.outputs.alloc_bytes, p2.outputs.alloc_bytes);
      }
    }
}

TEST(MilRoundTrip, ParsedGraphHasTheOriginalConstantsAndAttributes) {
  ir::Graph g = tg::every_op();
  CompiledProgram p = emit_mil(g, default_chip());
  ir::Graph back = parse_mil(p.mil_text, p.weights, "model.mil");
  for (const char* name : {"w", "bias", "half", "two"}) {
    int a = g.find(name), b = back.find(name);
    ASSERT_GE(b, 0) << name;
    EXPECT_EQ(back.node(b).op, Op::Const);
    EXPECT_EQ(back.node(b).results, g.node(a).results) << name;
    EXPECT_EQ(back.node(b).data->bytes, g.node(a).data->bytes) << name;
  }
  const ir::Node& mm = back.node(back.find("mm"));
  EXPECT_EQ(mm.op, Op::Matmul);
  EXPECT_EQ(ir::attr_bool(mm.attrs, "transpose_x", "mm"), true);
  EXPECT_EQ(ir::attr_ints(back.node(back.find("rs")).attrs, "shape", "rs"), (std::vector<int64_t>{1, 8, 4, -1}));
  EXPECT_EQ(ir::attr_float(back.node(back.find("pd")).attrs, "value", "pd"), 1.5);
  EXPECT_EQ(back.node(back.find("s")).results.size(), 2u);
  EXPECT_EQ(back.find("c_strides"), -1);  // op parameters are attributes, not graph constants
  EXPECT_EQ(back.outputs().size(), g.outputs().size());
}

TEST(MilLiterals, EveryFp16ValueRoundTripsThroughItsText) {
  for (uint32_t bits = 0; bits < 65536; bits++) {
    uint16_t h = uint16_t(bits);
    if (std::isnan(f16_to_f32(h))) continue;
    std::string s = mil::format_element(ElemType::F16, reinterpret_cast<const uint8_t*>(&h));
    uint16_t back = 0;
    ASSERT_TRUE(mil::parse_element(ElemType::F16, s, reinterpret_cast<uint8_t*>(&back))) << s;
    ASSERT_EQ(back, h) << "0x" << std::hex << bits << " printed as " << s;
  }
  uint16_t eps = f32_to_f16(0.00001f), big = f32_to_f16(65504.f), one = f32_to_f16(1.f);
  EXPECT_EQ(mil::format_element(ElemType::F16, reinterpret_cast<const uint8_t*>(&eps)), "0.00001");
  EXPECT_EQ(mil::format_element(ElemType::F16, reinterpret_cast<const uint8_t*>(&big)), "65504.0");
  EXPECT_EQ(mil::format_element(ElemType::F16, reinterpret_cast<const uint8_t*>(&one)), "1.0");
}

TEST(MilLiterals, Fp32AndInt32RoundTrip) {
  for (float f : {0.1f, 1.0f / 3.0f, -2.5e-30f, 3.4e38f, 1e-45f, -0.0f, 123456.789f}) {
    std::string s = mil::format_element(ElemType::F32, reinterpret_cast<const uint8_t*>(&f));
    float back = 0;
    ASSERT_TRUE(mil::parse_element(ElemType::F32, s, reinterpret_cast<uint8_t*>(&back))) << s;
    EXPECT_EQ(std::memcmp(&back, &f, 4), 0) << s;
  }
  int32_t i = 0;
  EXPECT_TRUE(mil::parse_element(ElemType::I32, "-2147483648", reinterpret_cast<uint8_t*>(&i)));
  EXPECT_EQ(i, INT32_MIN);
  EXPECT_FALSE(mil::parse_element(ElemType::I32, "2147483648", reinterpret_cast<uint8_t*>(&i)));
  EXPECT_FALSE(mil::parse_element(ElemType::I32, "1.5", reinterpret_cast<uint8_t*>(&i)));
  EXPECT_FALSE(mil::parse_element(ElemType::F16, "1.2.3", reinterpret_cast<uint8_t*>(&i)));
}

}  // namespace
}  // namespace orion::compiler
