// orion compile and orion mil check, end to end through the binary: the files a model compile
// writes (per program model.mil, weights/*.bin, manifest.json; a top manifest.json), compiling an
// IR-text file, programs that break an ANE rule (exit 3, one line naming the rule and the node),
// and checking MIL files as written; and that a model compile writes exactly the programs the
// inference and training runners load.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "compiler/pass.h"
#include "compiler/pipeline.h"
#include "infer/ane_model.h"
#include "model/config.h"
#include "model/io/model_io.h"
#include "support.h"
#include "train/ane/ane_blocks.h"
#include "train/model/trainer_api.h"

namespace orion {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_orion;
using test::temp_dir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One line: exactly one '\n', at the end.
void expect_one_line(const std::string& err) {
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "not one line: " << err;
}

// A binding side of a program manifest: sorted by name (C6), one allocation size (C5/C13) at least
// the minimum buffer (C7) and the data's size, equal to the side's declared allocation size.
void check_side(const json& bindings, int64_t side_alloc, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(bindings.is_array());
  ASSERT_FALSE(bindings.empty());
  EXPECT_GE(side_alloc, 49152);
  for (size_t i = 0; i < bindings.size(); i++) {
    const json& b = bindings[i];
    if (i > 0) EXPECT_LT(bindings[i - 1]["name"].get<std::string>(), b["name"].get<std::string>());
    EXPECT_EQ(b["alloc_bytes"].get<int64_t>(), side_alloc) << b["name"];
    EXPECT_GE(side_alloc, b["bytes"].get<int64_t>()) << b["name"];
    EXPECT_EQ(b["dtype"], "fp16") << b["name"];
    int64_t numel = 1;
    for (int64_t d : b["shape"].get<std::vector<int64_t>>()) numel *= d;
    EXPECT_EQ(b["bytes"].get<int64_t>(), numel * 2) << b["name"];
  }
}

// Checks every program folder the top manifest lists; returns how many there were.
size_t check_compile_output(const std::string& dir, const std::string& chip) {
  json top = json::parse(slurp(dir + "/manifest.json"));
  EXPECT_EQ(top["chip"], chip);
  EXPECT_GE(top["compile_ms"].get<double>(), 0.0);
  for (const json& p : top["programs"]) {
    const std::string name = p["name"];
    SCOPED_TRACE(name);
    const std::string pdir = dir + "/" + name;
    std::string mil = slurp(pdir + "/model.mil");
    EXPECT_EQ(mil.rfind("program(1.3)\n", 0), 0u) << mil.substr(0, 80);
    // Every BLOBFILE the text names exists, and every weight file is named by the text.
    size_t blobfiles = 0;
    for (auto& e : fs::directory_iterator(pdir + "/weights")) {
      EXPECT_EQ(e.path().extension(), ".bin");
      EXPECT_GE(fs::file_size(e.path()), 128u) << e.path();  // header + one record at least
      EXPECT_TRUE(contains(mil, "@model_path/weights/" + e.path().filename().string())) << e.path();
      blobfiles++;
    }
    json m = json::parse(slurp(pdir + "/manifest.json"));
    EXPECT_EQ(m, p) << "the top manifest lists the program's own manifest";
    EXPECT_EQ(m["chip"], chip);
    EXPECT_EQ(m["blob_constants"].get<size_t>(), blobfiles);
    EXPECT_LE(m["blob_constants"].get<int>(), 16);  // C16
    EXPECT_GT(m["sram_estimate_bytes"].get<int64_t>(), 0);
    check_side(m["inputs"], m["input_alloc_bytes"], "inputs");
    check_side(m["outputs"], m["output_alloc_bytes"], "outputs");
    // Every binding is a parameter or a returned name of the MIL function.
    for (const json& b : m["inputs"])
      EXPECT_TRUE(contains(mil, "> " + b["name"].get<std::string>() + ",") ||
                  contains(mil, "> " + b["name"].get<std::string>() + ")"));
  }
  return top["programs"].size();
}

TEST(CliCompile, Stories260kWritesEveryTrainingProgram) {
  std::string dir = temp_dir(), out, err;
  ASSERT_EQ(run_orion("compile --config stories260k --seq 64 --for train --out " + dir, &out, &err), 0) << err;
  EXPECT_TRUE(contains(out, "compiled 26 program(s) for m4")) << out;
  // 5 layers × 5 training kernels with weights + the weight-free sdpa_bwd2 shared by every layer.
  // The classifier is not among them: every runner keeps it on the CPU.
  EXPECT_EQ(check_compile_output(dir, "m4"), 26u);
  json top = json::parse(slurp(dir + "/manifest.json"));
  EXPECT_EQ(top["seq"], 64);
  EXPECT_EQ(top["use"], "train");
  int qkv_bwd_4 = 0, attention_S = 0;
  for (const json& p : top["programs"]) {
    EXPECT_FALSE(contains(p["name"], "classifier"));
    if (p["kernel"] == "llama_qkv_bwd" && p["layer"] == 4) qkv_bwd_4++, attention_S = p["seq_bucket"];
    if (p["kernel"] == "llama_fwd_ffn") EXPECT_EQ(p["seq_bucket"], 64) << "position-wise kernels are padded (C7)";
  }
  EXPECT_EQ(qkv_bwd_4, 1);
  // 64 channels × 64 positions is below the minimum buffer and attention cannot be padded, so the
  // attention programs are built for a wider sequence bucket, and the manifest and stderr say so.
  EXPECT_GT(attention_S, 64);
  EXPECT_TRUE(fs::exists(dir + fmt::format("/layer04.llama_qkv_bwd.s{}/model.mil", attention_S)));
  EXPECT_TRUE(contains(err, "sequence bucket")) << err;
}

TEST(CliCompile, Gpt2TinyWritesEveryGenerationProgram) {
  std::string dir = temp_dir(), out, err;
  ASSERT_EQ(run_orion("compile --config gpt2-tiny --seq 64 --out " + dir, &out, &err), 0) << err;
  // 2 layers × (prefill attn, ffn, decode qkv, ffn) + final norm; the 50257-token classifier stays
  // on the CPU (C12).
  EXPECT_EQ(check_compile_output(dir, "m4"), 9u);
  EXPECT_FALSE(fs::exists(dir + "/classifier"));
  json qkv = json::parse(slurp(dir + "/layer01.gpt2_decode_qkv.s16/manifest.json"));
  std::vector<std::string> outs;
  for (const json& b : qkv["outputs"]) outs.push_back(b["name"]);
  EXPECT_EQ(outs, (std::vector<std::string>{"k", "q", "v"}));  // alphabetical (C6), not q, k, v
  EXPECT_EQ(qkv["outputs"][1]["declared_index"], 0);
  // The decode token's buffer was padded along the sequence (C7): the runtime reads that here.
  ASSERT_FALSE(qkv["boundary"]["changes"].empty());
  EXPECT_EQ(qkv["boundary"]["changes"][0]["rules"], json::array({"C7"}));
}

// (kernel, layer, S) of every program: what `orion compile` wrote, and what a runner loaded.
using ProgramSet = std::set<std::tuple<std::string, int, int>>;

ProgramSet compiled_programs(const std::string& model_args, int seq, const std::string& use) {
  std::string dir = temp_dir(), out, err;
  EXPECT_EQ(run_orion(fmt::format("compile {} --seq {} --for {} --out {}", model_args, seq, use, dir), &out, &err), 0)
      << err;
  ProgramSet s;
  const json top = json::parse(slurp(dir + "/manifest.json"));  // named: a range-for over a temporary's member dangles
  for (const json& p : top["programs"])
    s.insert(std::make_tuple(p["kernel"].get<std::string>(), p["layer"].get<int>(), p["seq_bucket"].get<int>()));
  return s;
}

// Generation through programs on anesim: a prompt of `seq` tokens, then one decoded token; the
// programs it loaded (and prepare() compiles the same list).
ProgramSet programs_generation_loads(const ModelWeights& w, int seq, const std::string& name) {
  AneRuntime rt("anesim");
  AneModel m(w, rt.cache, {.model_name = name});
  std::vector<int> tokens(seq);
  for (int i = 0; i < seq; i++) tokens[size_t(i)] = (i * 7 + 3) % w.config.vocab_size;
  m.forward(tokens.data(), seq, 0);
  m.forward(tokens.data(), 1, seq);
  ProgramSet loaded;
  for (const runtime::ProgramKey& k : rt.cache.keys()) loaded.insert({k.kernel, k.layer, k.bucket});
  EXPECT_EQ(int(loaded.size()), m.prepare(seq)) << "prepare() compiles the same list";
  return loaded;
}

TEST(CliCompile, WritesExactlyTheProgramsGenerationLoads) {
  for (const char* config : {"gpt2-tiny", "stories260k"}) {
    SCOPED_TRACE(config);
    const int seq = 24;
    ModelWeights w = random_weights(config_preset(config), 1);
    const ProgramSet loaded = programs_generation_loads(w, seq, config);
    EXPECT_EQ(compiled_programs(fmt::format("--config {}", config), seq, "generate"), loaded);
  }
}

// Llama's relatives on the ANE path (tiny random models saved as Hugging Face folders): `orion
// compile --for generate` writes programs that pass `orion mil check`, and exactly the set that
// generation loads — with the q/k/v biases (Qwen2), per-head q/k norms and head_dim ≠ C/NH (Qwen3),
// the sliding-window mask (Mistral) and llama3-scaled RoPE tables inside them.
TEST(CliCompile, RelativesOfLlamaCompileTheProgramsGenerationLoads) {
  auto config = [](Arch arch) {
    ModelConfig c = config_preset("stories260k");
    c.arch = arch;
    c.dim = 192, c.hidden_dim = 512, c.n_heads = 6, c.n_kv_heads = 3, c.n_layers = 2, c.seq_len = 128;
    c.tied_embeddings = false;
    return c;
  };
  ModelConfig llama3 = config(Arch::Llama), qwen3 = config(Arch::Qwen3), mistral = config(Arch::Mistral);
  llama3.rope_scaling = {RopeScaling::Kind::Llama3, 8.0f, 1.0f, 4.0f, 64};
  qwen3.head_size = 48;
  mistral.sliding_window = 6;
  for (const ModelConfig& c : {llama3, config(Arch::Qwen2), qwen3, mistral}) {
    SCOPED_TRACE(c.describe());
    const int seq = 24;
    ModelWeights w = random_weights(c, 1);
    const std::string model = temp_dir() + "/hf";
    save_model(w, model, ModelFormat::Safetensors);
    const ProgramSet loaded = programs_generation_loads(w, seq, arch_name(c.arch));
    const std::string dir = temp_dir();
    std::string out, err;
    ASSERT_EQ(run_orion(fmt::format("compile --model {} --seq {} --for generate --out {}", model, seq, dir), &out, &err), 0)
        << err;
    EXPECT_EQ(check_compile_output(dir, "m4"), loaded.size());
    ProgramSet compiled;
    const json top = json::parse(slurp(dir + "/manifest.json"));
    for (const json& p : top["programs"]) {
      compiled.insert(std::make_tuple(p["kernel"].get<std::string>(), p["layer"].get<int>(), p["seq_bucket"].get<int>()));
      const std::string mil = dir + "/" + p["name"].get<std::string>() + "/model.mil";
      EXPECT_EQ(run_orion("mil check " + mil + " --chip m4", &out, &err), 0) << mil << ": " << out << err;
    }
    EXPECT_EQ(compiled, loaded);
  }
}

// Training through programs on anesim: every program is compiled before the first forward's first
// evaluation (one forward of B = 1 sequence of `seq` tokens).
TEST(CliCompile, WritesExactlyTheProgramsTrainingLoads) {
  for (const char* config : {"gpt2-tiny", "stories260k"}) {
    SCOPED_TRACE(config);
    const int seq = 32;
    const ModelConfig c = config_preset(config);
    train::Params p(c);
    train::init_params(p, 3);
    train::Grads g(c);
    train::TrainModel model(p, &g, 1, seq);
    train::AneTrainOptions o;
    o.quiet = true;
    auto blocks = train::make_ane_blocks(p, &g, 1, seq, o);
    train::AneBlocks* runner = blocks.get();
    model.set_blocks(std::move(blocks));
    std::vector<int> tokens(seq + 1);
    for (int i = 0; i <= seq; i++) tokens[size_t(i)] = (i * 5 + 1) % c.vocab_size;
    model.forward(tokens.data(), tokens.data() + 1);
    ProgramSet loaded;
    for (const frontends::ProgramSpec& s : runner->program_list()) loaded.insert({s.kernel, s.layer, s.S});
    EXPECT_EQ(int(loaded.size()), runner->programs()) << "every program listed is loaded, once";
    EXPECT_EQ(compiled_programs(fmt::format("--config {}", config), seq, "train"), loaded);
  }
}

TEST(CliCompile, ChipSelectsSyntax) {
  std::string dir = temp_dir(), out, err;
  ASSERT_EQ(run_orion("compile --config gpt2-tiny --chip m1 --out " + dir, &out, &err), 0) << err;
  std::string mil = slurp(dir + "/final_norm.s16/model.mil");
  EXPECT_EQ(mil.rfind("program(1.0)\n", 0), 0u);
  EXPECT_TRUE(contains(mil, "func main<ios16>("));
}

const char* kLegalIr = R"(graph proj {
  %x = input : fp16[1, 256, 1, 128]
  %w = const splat<0.25> : fp16[256, 256, 1, 1]
  %b = const splat<0.5> : fp16[1, 256, 1, 1]
  %y = conv1x1(%x, %w) : fp16[1, 256, 1, 128]
  %z = add(%y, %b) : fp16[1, 256, 1, 128]
  %g = gelu(%z) : fp16[1, 256, 1, 128]
  return %out = %g, %pre = %z
}
)";

TEST(CliCompile, IrFile) {
  std::string dir = temp_dir(), out, err;
  write(dir + "/proj.ir", kLegalIr);
  ASSERT_EQ(run_orion("compile --ir " + dir + "/proj.ir --out " + dir + "/out", &out, &err), 0) << err;
  EXPECT_EQ(check_compile_output(dir + "/out", "m4"), 1u);
  std::string mil = slurp(dir + "/out/proj/model.mil");
  EXPECT_TRUE(contains(mil, "func main<ios18>(tensor<fp16, [1, 256, 1, 128]> x) {")) << mil;
  EXPECT_FALSE(contains(mil, "gelu(")) << "gelu is expanded (C2)";
  EXPECT_TRUE(contains(mil, "tanh(")) << mil;
  EXPECT_TRUE(contains(mil, "} -> (out, pre);")) << mil;
  EXPECT_TRUE(fs::exists(dir + "/out/proj/weights/w.bin"));
  // The compiled program passes the MIL checker for the chip it was built for.
  ASSERT_EQ(run_orion("mil check " + dir + "/out/proj/model.mil --chip m4", &out, &err), 0) << out << err;
  EXPECT_TRUE(contains(out, "ok for m4")) << out;
}

TEST(CliCompile, RuleBreakIsExitThreeNamingRuleAndNode) {
  std::string dir = temp_dir(), out, err;
  // C1: a concat inside the program (its result feeds another op, so it cannot become two outputs).
  write(dir + "/cat.ir", R"(graph joined {
  %a = input : fp16[1, 256, 1, 128]
  %b = input : fp16[1, 256, 1, 128]
  %cat = concat(%a, %b) {axis = 1} : fp16[1, 512, 1, 128]
  %t = tanh(%cat) : fp16[1, 512, 1, 128]
  return %out = %t
}
)");
  EXPECT_EQ(run_orion("compile --ir " + dir + "/cat.ir --out " + dir + "/o1", &out, &err), 3);
  expect_one_line(err);
  EXPECT_TRUE(contains(err, "C1 'cat'")) << err;
  EXPECT_TRUE(contains(err, "concat")) << err;
  EXPECT_TRUE(contains(err, "cat.ir")) << err;
  EXPECT_FALSE(fs::exists(dir + "/o1/joined/model.mil"));
  // C12: a classifier wider than the chip's channel limit (a 32000-token vocabulary).
  write(dir + "/cls.ir", R"(graph classifier {
  %x = input : fp16[1, 64, 1, 512]
  %w = const splat<0.01> : fp16[32000, 64, 1, 1]
  %logits = conv1x1(%x, %w) : fp16[1, 32000, 1, 512]
  return %logits = %logits
}
)");
  EXPECT_EQ(run_orion("compile --ir " + dir + "/cls.ir --out " + dir + "/o2", &out, &err), 3);
  expect_one_line(err);
  EXPECT_TRUE(contains(err, "C12 'logits'")) << err;
  EXPECT_TRUE(contains(err, "32000")) << err;
}

TEST(CliCompile, BadArgumentsAreUsageErrors) {
  std::string dir = temp_dir(), out, err;
  EXPECT_EQ(run_orion("compile --out " + dir + "/o", &out, &err), 2);
  EXPECT_TRUE(contains(err, "exactly one of")) << err;
  EXPECT_FALSE(fs::exists(dir + "/o")) << "nothing is written for a usage error";
  EXPECT_EQ(run_orion("compile --config stories260k --seq 513 --out " + dir + "/o", &out, &err), 2);
  EXPECT_EQ(run_orion("compile --config stories260k --chip m9 --out " + dir + "/o", &out, &err), 2);
  EXPECT_EQ(run_orion("compile --ir " + dir + "/missing.ir --out " + dir + "/o", &out, &err), 3);
  expect_one_line(err);
}

TEST(CliCompile, ListPassesNamesEveryRegisteredPassWithItsSummary) {
  std::string out, err;
  ASSERT_EQ(run_orion("compile --list-passes", &out, &err), 0) << err;
  for (const std::string& name : compiler::pass_names())
    EXPECT_TRUE(contains(out, "  " + name + " ")) << name << " missing from\n" << out;
  EXPECT_TRUE(contains(out, compiler::make_pass("legalize-ane")->summary())) << out;
  // The first list is the pipeline, in the order a compile runs it (a pass may run twice).
  std::istringstream lines(out);
  std::string line, name;
  std::vector<std::string> listed;
  std::getline(lines, line);
  while (std::getline(lines, line) && line.rfind("  ", 0) == 0) listed.push_back((std::istringstream(line) >> name, name));
  EXPECT_EQ(listed, compiler::standard_pipeline()) << out;
}

// A MIL program written by hand: a norm with rsqrt (C17 on M1) on a buffer of the minimum size.
const char* kRsqrtMil = R"(program(1.3)
[buildInfo = dict<string, string>({{"coremlc-component-MIL", "3510.2.1"}})]
{
    func main<ios18>(tensor<fp16, [1, 768, 1, 32]> x) {
        tensor<fp16, [1, 768, 1, 32]> sq = mul(x = x, y = x)[name = string("sq")];
        tensor<fp16, [1, 768, 1, 32]> r = rsqrt(x = sq)[name = string("r")];
    } -> (r);
}
)";

TEST(CliMilCheck, HandWrittenRsqrtFailsOnM1Only) {
  std::string dir = temp_dir(), out, err;
  write(dir + "/norm.mil", kRsqrtMil);
  ASSERT_EQ(run_orion("mil check " + dir + "/norm.mil --chip m4", &out, &err), 0) << out << err;
  EXPECT_TRUE(contains(out, "ok for m4")) << out;
  // Checked as written: legalize-ane could rewrite rsqrt, but the file itself breaks C17 on M1 —
  // and, being program(1.3), C18 too: M1 takes program(1.0).
  EXPECT_EQ(run_orion("mil check " + dir + "/norm.mil --chip m1", &out, &err), 3);
  EXPECT_TRUE(contains(out, "error C17 'r'")) << out;
  EXPECT_TRUE(contains(out, "rsqrt")) << out;
  EXPECT_TRUE(contains(out, "error C18: program(1.3) is newer than m1 accepts")) << out;
  expect_one_line(err);
  EXPECT_TRUE(contains(err, "2 rule violation(s) for m1")) << err;
}

// A program version with an opset it does not carry is refused on every chip (C18).
TEST(CliMilCheck, ProgramVersionAndOpsetMustPair) {
  std::string dir = temp_dir(), out, err;
  std::string text = kRsqrtMil;
  text.replace(text.find("main<ios18>"), 11, "main<ios16>");
  write(dir + "/pair.mil", text);
  EXPECT_EQ(run_orion("mil check " + dir + "/pair.mil --chip m4", &out, &err), 3);
  EXPECT_TRUE(contains(out, "error C18: program(1.3) carries opsets ios18, not func main<ios16>")) << out;
  EXPECT_TRUE(contains(err, "1 rule violation(s) for m4")) << err;
}

TEST(CliMilCheck, ListsEveryRuleBroken) {
  std::string dir = temp_dir(), out, err;
  // A concat (C1), an input and an output below the minimum buffer (C7): all are listed.
  write(dir + "/bad.mil", R"(program(1.3)
[buildInfo = dict<string, string>({{"coremlc-component-MIL", "3510.2.1"}})]
{
    func main<ios18>(tensor<fp16, [1, 768, 1, 32]> a, tensor<fp16, [1, 768, 1, 32]> b, tensor<fp16, [1, 8, 1, 32]> c) {
        int32 cat_axis = const()[name = string("cat_axis"), val = int32(1)];
        bool cat_interleave = const()[name = string("cat_interleave"), val = bool(false)];
        tensor<fp16, [1, 1536, 1, 32]> cat = concat(axis = cat_axis, interleave = cat_interleave, values = (a, b))[name = string("cat")];
        tensor<fp16, [1, 1536, 1, 32]> t = tanh(x = cat)[name = string("t")];
        tensor<fp16, [1, 8, 1, 32]> small = relu(x = c)[name = string("small")];
    } -> (t, small);
}
)");
  EXPECT_EQ(run_orion("mil check " + dir + "/bad.mil", &out, &err), 3) << out << err;
  EXPECT_TRUE(contains(out, "error C1 'cat'")) << out;
  EXPECT_TRUE(contains(out, "error C7 'c'")) << out;
  EXPECT_TRUE(contains(out, "error C7 'small'")) << out;
  expect_one_line(err);
  EXPECT_TRUE(contains(err, "3 rule violation(s) for m4")) << err;
}

TEST(CliMilCheck, MalformedMilIsOneLineWithPosition) {
  std::string dir = temp_dir(), out, err;
  write(dir + "/broken.mil", std::string(kRsqrtMil).substr(0, 200));
  EXPECT_EQ(run_orion("mil check " + dir + "/broken.mil", &out, &err), 3);
  expect_one_line(err);
  EXPECT_TRUE(contains(err, "broken.mil")) << err;
  EXPECT_TRUE(contains(err, "line")) << err;
}

}  // namespace
}  // namespace orion
