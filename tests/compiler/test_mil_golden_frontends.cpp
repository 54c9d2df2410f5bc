// Golden MIL for real frontend kernels: each case builds one kernel on a tiny model with
// deterministic weights, runs the standard pipeline for a chip and emits MIL; the text must equal
// tests/testdata/compiler/mil_frontends/<case>.mil byte for byte, and the weight files must match
// the sizes and FNV-1a hashes listed in <case>.blobs — so a change in the emitted text, in the
// pipeline's rewrites or in a single weight byte fails here.
//
// A second test prints every kernel the frontends build, before any pass, as IR text and compares
// it with tests/testdata/compiler/frontend_ir/<kernel>.ir: the graphs must not depend on the C++
// compiler (e.g. on the unspecified order in which it evaluates the arguments of one call, which
// decides which node is created — and named — first).
//
// The goldens change only on purpose:
//   ORION_UPDATE_GOLDEN=1 ./build/tests/compiler_test_mil_golden_frontends   (review the diff, commit)
//
// Weights come from a counter-based generator (SplitMix64) with integer-only arithmetic, not from
// <random>'s distributions, whose output differs between standard libraries.
#include <gtest/gtest.h>

#include <cinttypes>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>

#include "compiler/mil/emit_mil.h"
#include "compiler/pipeline.h"
#include "ir/text.h"
#include "model/frontends/frontends.h"
#include "model/frontends/lora_frontends.h"
#include "model/weights.h"
#include "support.h"

namespace orion::compiler {
namespace {

namespace fs = std::filesystem;
using namespace orion::frontends;

// ---- deterministic tiny models ----------------------------------------------------------------

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) with 24 bits: exact in float, the same everywhere.
float unit(uint64_t& state) { return float(int32_t(splitmix64(state) >> 40) - (1 << 23)) / float(1 << 23); }

// random_weights' tensors (for their shapes and storage) refilled from SplitMix64: matrices
// ±0.1, norm weights 1 ± 0.3, biases ±0.1, so every term of every kernel shows in the weights.
ModelWeights golden_weights(const ModelConfig& c, uint64_t seed) {
  ModelWeights w = random_weights(c, 1);
  uint64_t state = seed;
  for (auto& [name, t] : w.named_tensors_mut()) {
    float* p = const_cast<float*>(static_cast<const float*>(t->data));  // random_weights owns f32 buffers
    bool norm = name.find("norm") != std::string::npos && name.substr(name.size() - 2) != "_b";
    for (int64_t i = 0; i < t->numel(); i++) {
      float u = unit(state);
      p[i] = t->shape.size() == 2 ? 0.1f * u : norm ? 1.0f + 0.3f * u : 0.1f * u;
    }
  }
  return w;
}

ModelConfig config(Arch arch, int dim, int hidden, int heads, int kv_heads) {
  ModelConfig c;
  c.arch = arch;
  c.dim = dim, c.hidden_dim = hidden, c.n_heads = heads, c.n_kv_heads = kv_heads, c.n_layers = 2;
  c.vocab_size = 64, c.padded_vocab = 64, c.seq_len = 256;
  c.validate("golden");
  return c;
}

const ModelWeights& gpt2() {
  static const ModelWeights w = golden_weights(config(Arch::GPT2, 32, 64, 2, 2), 0x6770740001ull);
  return w;
}
const ModelWeights& stories() {
  static const ModelWeights w = golden_weights(config(Arch::Llama, 32, 48, 4, 2), 0x73746f0002ull);
  return w;
}
// Attention mixes positions, so legalize-ane cannot pad its buffers to the C7 minimum: this model
// is wide enough (96 channels × 256 positions × 2 bytes = 49,152) to be legal at S = 256.
const ModelWeights& stories_wide() {
  static const ModelWeights w = golden_weights(config(Arch::Llama, 96, 64, 4, 4), 0x73746f0003ull);
  return w;
}

// LoRA adapters are program inputs that carry no sequence axis ([1, r, 1, in], [1, out, 1, r]), so
// nothing pads them: a legal LoRA linear needs r·in and out·r of at least 24,576 fp16 elements.
struct LoraLayer {
  std::vector<float> w, b;  // W [out, in], bias [out]
  Tensor W, bias;
};
const LoraLayer& lora_layer() {
  static const LoraLayer l = [] {
    const int64_t in = 768, out = 768;
    LoraLayer l;
    uint64_t state = 0x6c6f7261ull;
    for (int64_t i = 0; i < out * in; i++) l.w.push_back(0.05f * unit(state));
    for (int64_t i = 0; i < out; i++) l.b.push_back(0.1f * unit(state));
    l.W = {l.w.data(), DType::F32, {out, in}};
    l.bias = {l.b.data(), DType::F32, {out}};
    return l;
  }();
  return l;
}

struct Case {
  std::string name;  // also the golden file's stem: <kernel>_<chip>
  std::string chip;
  std::function<ir::Graph()> build;
};

std::vector<Case> cases() {
  return {
      {"gpt2_prefill_ffn_m4", "m4", [] { return gpt2_prefill_ffn(gpt2(), 1, 16); }},
      {"gpt2_decode_qkv_m4", "m4", [] { return gpt2_decode_qkv(gpt2(), 0, 16); }},
      {"gpt2_decode_qkv_m1", "m1", [] { return gpt2_decode_qkv(gpt2(), 0, 16); }},
      {"llama_fwd_attn_m4", "m4", [] { return llama_fwd_attn(stories_wide(), 1, 256); }},
      {"llama_ffn_bwd_m4", "m4", [] { return llama_ffn_bwd(stories(), 0, 16); }},
      {"lora_linear_m4", "m4", [] { return lora_linear(lora_layer().W, lora_layer().bias, 32, 16.0f, 32); }},
  };
}

// ---- golden files -----------------------------------------------------------------------------

bool updating_goldens() {
  const char* env = std::getenv("ORION_UPDATE_GOLDEN");
  return env && std::string(env) == "1";
}

std::string read_text(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// "<key> <bytes> fnv1a64=0x<16 hex>" per weight file, in key order.
std::string blob_summary(const CompiledProgram& p) {
  std::string s;
  for (const auto& [key, image] : p.weights)
    s += fmt::format("{} {} fnv1a64=0x{:016x}\n", key, image.size(), ir::fnv1a64(image.data(), image.size()));
  return s;
}

CompiledProgram compile_case(const Case& c) {
  ir::Graph g = c.build();
  PassContext ctx;
  ctx.chip = &chip_profile(c.chip);
  PipelineOptions o;
  o.verify_each = true;
  run_pipeline(g, standard_pipeline(), ctx, o);
  for (const Diagnostic& d : ctx.diagnostics)
    EXPECT_NE(d.level, Diagnostic::Level::Error) << d.rule << " '" << d.node << "': " << d.message;
  return emit_mil(g, *ctx.chip);
}

void expect_golden(const std::string& rel, const std::string& actual) {
  std::string path = test::data_path("compiler/mil_frontends/" + rel);
  if (updating_goldens()) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << actual;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " is missing; run with ORION_UPDATE_GOLDEN=1";
  EXPECT_EQ(actual, read_text(path)) << rel
                                     << " differs from its golden file; if intended, regenerate with ORION_UPDATE_GOLDEN=1";
}

TEST(MilGoldenFrontends, TextAndWeightsMatchGoldens) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    CompiledProgram p = compile_case(c);
    EXPECT_FALSE(p.weights.empty());
    expect_golden(c.name + ".mil", p.mil_text);
    expect_golden(c.name + ".blobs", blob_summary(p));
  }
}

// Every frontend kernel, on the tiny models above (one layer, one short sequence each).
std::vector<std::pair<std::string, std::function<ir::Graph()>>> every_kernel() {
  using namespace frontends;
  return {
      {"gpt2_prefill_attn", [] { return gpt2_prefill_attn(gpt2(), 1, 8); }},
      {"gpt2_prefill_ffn", [] { return gpt2_prefill_ffn(gpt2(), 1, 8); }},
      {"gpt2_decode_qkv", [] { return gpt2_decode_qkv(gpt2(), 0, 8); }},
      {"gpt2_decode_ffn", [] { return gpt2_decode_ffn(gpt2(), 0, 8); }},
      {"final_norm_gpt2", [] { return final_norm(gpt2(), 8); }},
      {"final_norm_llama", [] { return final_norm(stories(), 8); }},
      {"gpt2_fwd_attn", [] { return gpt2_fwd_attn(gpt2(), 1, 8); }},
      {"gpt2_fwd_ffn", [] { return gpt2_fwd_ffn(gpt2(), 1, 8); }},
      {"gpt2_ffn_bwd", [] { return gpt2_ffn_bwd(gpt2(), 1, 8); }},
      {"gpt2_qkv_bwd", [] { return gpt2_qkv_bwd(gpt2(), 1, 8); }},
      {"llama_fwd_attn", [] { return llama_fwd_attn(stories(), 1, 8); }},
      {"llama_fwd_ffn", [] { return llama_fwd_ffn(stories(), 1, 8); }},
      {"llama_ffn_bwd", [] { return llama_ffn_bwd(stories(), 1, 8); }},
      {"sdpa_bwd1", [] { return sdpa_bwd1(stories(), 1, 8); }},
      {"sdpa_bwd2", [] { return sdpa_bwd2(stories().config, 8); }},
      {"llama_qkv_bwd", [] { return llama_qkv_bwd(stories(), 1, 8); }},
      {"classifier_fwd", [] { return classifier_fwd(stories(), 8); }},
      {"vocab_softmax", [] { return vocab_softmax(64, 8); }},
      {"lora_linear", [] { return lora_linear(lora_layer().W, lora_layer().bias, 4, 16.0f, 8); }},
      {"lora_attention", [] { return lora_attention(stories(), 1, 8, 4, 8.0f); }},
      {"lora_prefill_attn_gpt2", [] { return lora_prefill_attn(gpt2(), 1, 8, 4); }},
      {"lora_prefill_attn_llama", [] { return lora_prefill_attn(stories(), 1, 8, 4); }},
      {"lora_decode_qkv_gpt2", [] { return lora_decode_qkv(gpt2(), 0, 8, 4); }},
      {"lora_decode_qkv_llama", [] { return lora_decode_qkv(stories(), 0, 8, 4); }},
      {"llama_lora_fwd_attn", [] { return llama_lora_fwd_attn(stories(), 1, 8, 4); }},
      {"llama_lora_qkv_bwd", [] { return llama_lora_qkv_bwd(stories(), 1, 8, 4); }},
      {"gpt2_lora_fwd_attn", [] { return gpt2_lora_fwd_attn(gpt2(), 1, 8, 4); }},
      {"gpt2_lora_qkv_bwd", [] { return gpt2_lora_qkv_bwd(gpt2(), 1, 8, 4); }},
  };
}

TEST(MilGoldenFrontends, EveryKernelGraphMatchesItsGolden) {
  ir::PrintOptions print;
  print.elide_constants_above = 16;  // weights as size + hash; scalars and tiny tables in full
  for (const auto& [name, build] : every_kernel()) {
    SCOPED_TRACE(name);
    expect_golden("../frontend_ir/" + name + ".ir", ir::print_graph(build(), print));
  }
}

// The blob summary really depends on the weights: one changed weight changes its hash.
TEST(MilGoldenFrontends, OneWeightChangeChangesTheBlobSummary) {
  ModelWeights w = golden_weights(config(Arch::GPT2, 32, 64, 2, 2), 0x6770740001ull);
  Case base{"x", "m4", [&] { return gpt2_decode_qkv(w, 0, 16); }};
  std::string before = blob_summary(compile_case(base)), text_before = compile_case(base).mil_text;
  float* wq = const_cast<float*>(static_cast<const float*>(w.layers[0].wq.data));
  wq[5] += 0.01f;
  CompiledProgram after = compile_case(base);
  EXPECT_NE(blob_summary(after), before);
  EXPECT_EQ(after.mil_text, text_before) << "weights live in the blobs, not in the text";
}

// The same inputs give the same bytes (a golden is only meaningful if emission is deterministic).
TEST(MilGoldenFrontends, EmissionIsDeterministic) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    CompiledProgram a = compile_case(c), b = compile_case(c);
    EXPECT_EQ(a.mil_text, b.mil_text);
    EXPECT_EQ(a.weights, b.weights);
  }
}

}  // namespace
}  // namespace orion::compiler
