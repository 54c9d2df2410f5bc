// Generation through ANE programs on anesim for Llama's relatives, against the CPU reference: each
// family's feature — GQA with a tied classifier (SmolLM2), llama3 RoPE scaling (Llama 3.x), q/k/v
// biases (Qwen2), per-head q/k RMSNorm with head_dim ≠ C/NH (Qwen3), a sliding window (Mistral) —
// computed by the programs (prefill) and by the CPU between them (decode), with the same greedy
// tokens as the CPU and logits within fp16 tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "infer/ane_model.h"
#include "infer/generate.h"
#include "model/family/llama/llama.h"
#include "model/test_io_util.h"
#include "runtime/cpu/kernels.h"
#include "support.h"

namespace orion {
namespace {

// The shape of test_anesim_generate.cpp's small Llama (k, v of 96 channels reach the C7 minimum
// buffer at a 256-column bucket), with one family's feature switched on.
struct FamilyCase {
  const char* name;
  ModelConfig config;
};

ModelConfig small(Arch arch) {
  ModelConfig c = test::tiny_llama(/*tied=*/false);
  c.arch = arch;
  c.dim = 192, c.hidden_dim = 512, c.n_heads = 6, c.n_kv_heads = 3, c.n_layers = 2, c.seq_len = 128;
  c.vocab_size = c.padded_vocab = 512;
  return c;
}

std::vector<FamilyCase> family_cases() {
  std::vector<FamilyCase> cases;
  ModelConfig smol = small(Arch::Llama);  // SmolLM2: plain Llama, tied, GQA, its own rope_theta
  smol.tied_embeddings = true, smol.rope_theta = 100000.0f;
  cases.push_back({"smollm2", smol});
  ModelConfig llama3 = small(Arch::Llama);  // Llama 3.x: every pair kind of the scaling (kept, divided, blended)
  llama3.rope_theta = 500000.0f;
  llama3.rope_scaling = {RopeScaling::Kind::Llama3, 8.0f, 1.0f, 4.0f, 64};
  cases.push_back({"llama3", llama3});
  cases.push_back({"qwen2", small(Arch::Qwen2)});
  ModelConfig qwen3 = small(Arch::Qwen3);  // HS 48: q has 288 channels, C 192
  qwen3.head_size = 48;
  cases.push_back({"qwen3", qwen3});
  ModelConfig mistral = small(Arch::Mistral);  // the window is shorter than the prompt
  mistral.sliding_window = 6;
  cases.push_back({"mistral", mistral});
  return cases;
}

// Random weights with random vectors (biases, norms: test_io_util.h), Wq and Wk scaled by 4 so
// that which tokens a query attends to moves the logits (see test_anesim_generate.cpp's sharpened).
ModelWeights family_model(const ModelConfig& c, uint64_t seed) {
  ModelWeights w = test::random_model(c, seed);
  for (LayerWeights& l : w.layers)
    for (Tensor* t : {&l.wq, &l.wk}) {
      void* out = nullptr;
      Tensor scaled = w.alloc_tensor(t->shape, DType::F32, &out);
      for (int64_t i = 0; i < t->numel(); i++) static_cast<float*>(out)[i] = 4.0f * t->f32()[i];
      *t = scaled;
    }
  return w;
}

class OneThread : public testing::Environment {  // see test_anesim_generate.cpp
  void SetUp() override { cpu::set_num_threads(1); }
};
const auto* const kOneThread = testing::AddGlobalTestEnvironment(new OneThread);

std::vector<int> some_tokens(int n, int V, uint32_t seed) {
  std::vector<int> t(static_cast<size_t>(n));
  for (int& x : t) x = int((seed = seed * 1664525u + 1013904223u) >> 8) % V;
  return t;
}

// max over rows of |ane − cpu| / max |cpu|
double relative_error(const float* cpu, const float* ane, int V) {
  double scale = 0, worst = 0;
  for (int i = 0; i < V; i++)
    scale = std::max(scale, double(std::fabs(cpu[i]))), worst = std::max(worst, double(std::fabs(cpu[i] - ane[i])));
  return worst / scale;
}

// Free-running greedy generation (16 tokens after a 10-token prompt: a prefill program, then the
// decode path) gives the CPU's tokens, and teacher-forced logits stay within the fp16 tolerance of
// the existing anesim tests at every position.
TEST(anesim_Families, GreedyTokensAndLogitsEqualTheCpus) {
  for (const FamilyCase& fc : family_cases()) {
    SCOPED_TRACE(fc.name);
    const ModelWeights w = family_model(fc.config, 7);
    const int V = w.config.vocab_size;
    AneRuntime rt("anesim");
    AneModel ane(w, rt.cache, {fc.name});
    Transformer tf(w);
    GenerateOptions o;
    o.max_new_tokens = 16;
    o.sampler.temperature = 0;
    const std::vector<int> prompt = some_tokens(10, V, 11);
    std::vector<int> cpu_out, ane_out;
    generate(tf, prompt, o, [&](int id) { cpu_out.push_back(id); });
    generate(ane, prompt, o, [&](int id) { ane_out.push_back(id); });
    ASSERT_EQ(cpu_out.size(), 16u);
    EXPECT_EQ(ane_out, cpu_out);

    // The same continuation, teacher-forced: logits of the prefill row and of every decode step.
    Transformer tf2(w);
    AneModel ane2(w, rt.cache, {fc.name});
    double rel = 0;
    const float* lc = tf2.forward(prompt.data(), int(prompt.size()), 0);
    const float* la = ane2.forward(prompt.data(), int(prompt.size()), 0);
    for (size_t i = 0; i < cpu_out.size(); i++) {
      rel = std::max(rel, relative_error(lc, la, V));
      const int pos = int(prompt.size() + i);
      lc = tf2.forward(&cpu_out[i], 1, pos);
      la = ane2.forward(&cpu_out[i], 1, pos);
    }
    std::printf("[anesim] %s: %zu greedy tokens equal, logits max rel %.3g\n", fc.name, cpu_out.size(), rel);
    EXPECT_LT(rel, 2e-2);
    EXPECT_GT(rel, 0) << "bit-identical logits would mean the CPU ran, not fp16 programs";
  }
}

// A decode batch projects with llama_decode_qkv (fwd_attn's projection nodes without RoPE and
// attention): with each family's feature (biases, q/k norms, head size, scaled RoPE on the CPU,
// the window) every row of a batch equals that row decoded alone, bit for bit.
TEST(anesim_Families, BatchedDecodeRowsEqualEachRowAlone) {
  constexpr int kRows = 3;
  for (const FamilyCase& fc : family_cases()) {
    SCOPED_TRACE(fc.name);
    const ModelWeights w = family_model(fc.config, 7);
    const int V = w.config.vocab_size;
    AneRuntime rt("anesim");
    std::vector<std::unique_ptr<AneModel>> batched, alone;
    std::vector<AneModel*> m;
    std::vector<int> tok(kRows), pos(kRows);
    for (int b = 0; b < kRows; b++) {
      batched.push_back(std::make_unique<AneModel>(w, rt.cache, AneModelOptions{fc.name}));
      alone.push_back(std::make_unique<AneModel>(w, rt.cache, AneModelOptions{fc.name}));
      m.push_back(batched.back().get());
      const std::vector<int> prompt = some_tokens(8 + b, V, 5 + uint32_t(b));  // past Mistral's window of 6
      batched.back()->forward(prompt.data(), int(prompt.size()), 0);
      const float* l = alone.back()->forward(prompt.data(), int(prompt.size()), 0);
      tok[size_t(b)] = int(std::max_element(l, l + V) - l), pos[size_t(b)] = int(prompt.size());
    }
    std::vector<float> logits(size_t(kRows) * V);
    for (int step = 0; step < 2; step++) {
      AneModel::decode_batch(m, tok.data(), pos.data(), logits.data());
      for (int b = 0; b < kRows; b++) {
        const float* want = alone[size_t(b)]->forward(&tok[size_t(b)], 1, pos[size_t(b)]);
        EXPECT_TRUE(std::equal(want, want + V, logits.data() + size_t(b) * V)) << "row " << b << " step " << step;
        tok[size_t(b)] = int(std::max_element(want, want + V) - want), pos[size_t(b)]++;
      }
    }
  }
}

// The features change the numbers: with each one dropped from the CPU's config the logits move far
// beyond the tolerance above — so the agreement above is the programs computing the feature.
TEST(anesim_Families, EachFeatureMovesTheLogits) {
  for (const FamilyCase& fc : family_cases()) {
    if (fc.config.rope_scaling.kind == RopeScaling::Kind::None && fc.config.sliding_window == 0)
      continue;  // the features that are weights (biases, q/k norms) or shapes (head size)
    ModelConfig plain = fc.config;
    plain.rope_scaling = {}, plain.sliding_window = 0;
    SCOPED_TRACE(fc.name);
    const ModelWeights w = family_model(fc.config, 7);
    ModelWeights without = family_model(plain, 7);
    const std::vector<int> prompt = some_tokens(20, w.config.vocab_size, 11);
    Transformer a(w), b(without);
    const float* la = a.forward(prompt.data(), 20, 0);
    std::vector<float> first(la, la + w.config.vocab_size);
    const float* lb = b.forward(prompt.data(), 20, 0);
    EXPECT_GT(relative_error(first.data(), lb, w.config.vocab_size), 5e-2);
  }
}

// The Llama 3 frequencies the programs' RoPE tables use are the CPU's (one function): the scaling
// keeps the high frequencies, divides the low ones by the factor.
TEST(anesim_Families, Llama3FrequenciesScaleTheLowOnes) {
  ModelConfig c = family_cases()[1].config, plain = c;
  plain.rope_scaling = {};
  const std::vector<float> scaled = llama_rope_frequencies(c), base = llama_rope_frequencies(plain);
  ASSERT_EQ(scaled.size(), size_t(c.head_dim() / 2));
  EXPECT_EQ(scaled.front(), base.front());
  EXPECT_FLOAT_EQ(scaled.back(), base.back() / 8.0f);
}

// LoRA slots stay refused for the relatives on the ANE path (their decode kernel has no q/k norms),
// naming the feature; plain Llama's are accepted.
TEST(anesim_Families, LoraSlotsAreRefusedNamingTheFeature) {
  for (const FamilyCase& fc : family_cases()) {
    SCOPED_TRACE(fc.name);
    const ModelWeights w = family_model(fc.config, 7);
    AneRuntime rt("anesim");
    AneModel ane(w, rt.cache, {fc.name});
    if (fc.config.cpu_only_features().empty()) {
      EXPECT_NO_THROW(ane.enable_lora(4));
      continue;
    }
    try {
      ane.enable_lora(4);
      ADD_FAILURE() << "enabled a LoRA slot";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("LoRA on the ANE path does not implement " + fc.config.cpu_only_features()[0]),
                std::string::npos)
          << e.what();
    }
  }
}

// `orion generate --backend anesim` on a Qwen3 folder (head_dim ≠ C/NH, q/k norms; the shipped small
// GPT-2 tokenizer) prints the CPU's greedy text.
TEST(anesim_FamiliesCli, GenerateQwen3MatchesCpuText) {
  ModelConfig c = family_cases()[3].config;
  c.vocab_size = c.padded_vocab = 1257;  // the tokenizer's vocabulary
  const std::string dir = test::temp_dir() + "/hf";
  save_model(family_model(c, 9), dir, ModelFormat::Safetensors);
  for (const char* f : {"vocab.json", "merges.txt"})
    std::filesystem::copy_file(test::data_path(std::string("tokenizer/small_gpt2/") + f), dir + "/" + f);
  const std::string base = "generate --model " + dir + " --prompt 'Hello world' --temperature 0 -n 12 --threads 1 ";
  std::string cpu_out, ane_out, err;
  ASSERT_EQ(test::run_orion(base + "--backend cpu", &cpu_out, &err), 0) << err;
  ASSERT_EQ(test::run_orion(base + "--backend anesim --verbose", &ane_out, &err), 0) << err;
  EXPECT_GT(ane_out.size(), std::string("Hello world\n").size());
  EXPECT_EQ(ane_out, cpu_out);
  EXPECT_NE(err.find("program cache:"), std::string::npos) << "the programs ran: " << err;
}

}  // namespace
}  // namespace orion
