// Generation through ANE programs on anesim against the CPU reference: greedy
// agreement per position, prefill logits within fp16 tolerance, the program cache reused across
// prompts, and `orion generate / bench generate --backend anesim` end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "infer/ane_model.h"
#include "infer/generate.h"
#include "model/io/model_io.h"
#include "runtime/cpu/kernels.h"
#include "support.h"

namespace orion {
namespace {

// Small models whose attention kernels reach the C7 minimum buffer (49,152 bytes) at modest
// buckets, so that tests stay quick on anesim: a GPT-2 with C = 256 (256 channels · 2 bytes · 128
// columns), and a Llama with grouped-query attention (6 query heads, 3 key/value heads of 32:
// k and v have 96 channels, so 256 columns). The stories260k preset (k, v of 32 channels) needs
// 1024 columns — every Llama decode step then runs a 1024-column attention kernel on anesim.
ModelConfig small_gpt2() {
  ModelConfig c = config_preset("gpt2-tiny");
  c.dim = 256, c.hidden_dim = 1024, c.n_heads = 4, c.n_kv_heads = 4, c.n_layers = 2;
  c.vocab_size = c.padded_vocab = 2000, c.seq_len = 256;
  return c;
}
ModelConfig small_llama() {
  ModelConfig c = config_preset("stories260k");
  c.dim = 192, c.hidden_dim = 512, c.n_heads = 6, c.n_kv_heads = 3, c.n_layers = 2, c.seq_len = 128;
  return c;
}

// Random weights (std 0.02) make poor judges of agreement: attention is nearly uniform, so a wrong
// position or a missing rotation hardly moves the logits, and the tied classifier favours the
// current token (its embedding is part of x), so the argmax says little about the blocks. Hence:
// Wq and Wk scaled by `gain` (attention scores × gain²: which tokens a query attends to matters),
// and an untied random classifier (N(0, 0.02²), no self-token bias).
ModelWeights sharpened(ModelConfig c, uint64_t seed, float gain = 4.0f) {
  c.tied_embeddings = false;  // random_weights draws the classifier apart from the embedding
  ModelWeights w = random_weights(c, seed);
  for (LayerWeights& l : w.layers)
    for (Tensor* t : {&l.wq, &l.wk}) {
      void* out = nullptr;
      Tensor scaled = w.alloc_tensor(t->shape, DType::F32, &out);
      for (int64_t i = 0; i < t->numel(); i++) static_cast<float*>(out)[i] = gain * t->f32()[i];
      *t = scaled;
    }
  return w;
}

// The suite runs on a shared machine: one host thread avoids OpenMP workers spin-waiting for
// cores that other processes hold (6× faster here); the results do not depend on it.
class OneThread : public testing::Environment {
  void SetUp() override { cpu::set_num_threads(1); }
};
const auto* const kOneThread = testing::AddGlobalTestEnvironment(new OneThread);

struct Rig : AneRuntime {  // one anesim driver (m4) with its budget and program cache
  Rig() : AneRuntime("anesim") {}
};

std::vector<int> some_tokens(int n, int V, uint32_t seed) {
  std::vector<int> t(static_cast<size_t>(n));
  for (int& x : t) x = int((seed = seed * 1664525u + 1013904223u) >> 8) % V;
  return t;
}

struct LogitError {
  double max_abs = 0, max_rel = 0;  // rel: |ane − cpu| / max |cpu| over the row
  void add(const float* cpu, const float* ane, int V) {
    double scale = 0, worst = 0;
    for (int i = 0; i < V; i++)
      scale = std::max(scale, double(std::fabs(cpu[i]))), worst = std::max(worst, double(std::fabs(cpu[i] - ane[i])));
    max_abs = std::max(max_abs, worst), max_rel = std::max(max_rel, worst / scale);
  }
};

struct Agreement {
  int same = 0, total = 0;
  LogitError err;
  double percent() const { return total ? 100.0 * same / total : 0; }
};

// Teacher-forced greedy agreement: the CPU's greedy continuation of `prompt` is fed to both models,
// and at every position the argmax of the two logit rows is compared (a disagreement does not
// derail the later positions, so each position is judged on the same prefix).
Agreement teacher_forced(const ModelWeights& w, AneModel& ane, const std::vector<int>& prompt, int steps) {
  Transformer tf(w);
  const int V = w.config.vocab_size, n = int(prompt.size());
  Agreement a;
  const float* lc = tf.forward(prompt.data(), n, 0);
  const float* la = ane.forward(prompt.data(), n, 0);
  for (int pos = n; pos < n + steps; pos++) {
    int want = argmax(lc, V);
    a.same += argmax(la, V) == want, a.total++;
    a.err.add(lc, la, V);
    lc = tf.forward(&want, 1, pos);
    la = ane.forward(&want, 1, pos);
  }
  return a;
}

void report(const char* what, const Agreement& a) {
  std::printf("[anesim] %s: top-1 agreement %d/%d = %.1f%%, logits max abs %.3g, max rel %.3g\n", what, a.same, a.total,
              a.percent(), a.err.max_abs, a.err.max_rel);
}

TEST(anesim_Generate, Gpt2GreedyAgreesWithCpuPerPosition) {
  ModelWeights w = sharpened(small_gpt2(), 41);
  Rig rig;
  AneModel ane(w, rig.cache, {"gpt2-small-test"});
  EXPECT_EQ(ane.attention_min_bucket(), 128);  // 256 channels · 2 bytes · 128 ≥ 49,152 (C7)
  Agreement a = teacher_forced(w, ane, some_tokens(12, w.config.vocab_size, 1), 60);
  report("gpt2 (C=256, L=2) teacher-forced, 60 positions", a);
  EXPECT_GE(a.percent(), 95.0);
  EXPECT_LT(a.err.max_rel, 2e-2);
}

TEST(anesim_Generate, StoriesGreedyAgreesWithCpuPerPosition) {
  ModelWeights w = sharpened(small_llama(), 42);
  Rig rig;
  AneModel ane(w, rig.cache, {"llama-small-test"});
  EXPECT_EQ(ane.attention_min_bucket(), 256);  // k, v have 96 channels: 96 · 2 · 256 ≥ 49,152
  Agreement a = teacher_forced(w, ane, some_tokens(9, w.config.vocab_size, 2), 50);
  report("llama (C=192, L=2, GQA 6/3) teacher-forced, 50 positions", a);
  EXPECT_GE(a.percent(), 95.0);
  EXPECT_LT(a.err.max_rel, 2e-2);
}

// Free-running greedy generation through generate() with either model behind the interface.
TEST(anesim_Generate, GenerateRunsEitherModelBehindOneInterface) {
  ModelWeights w = sharpened(small_gpt2(), 43);
  Rig rig;
  AneModel ane(w, rig.cache, {"gpt2-small-test"});
  Transformer tf(w);
  GenerateOptions o;
  o.max_new_tokens = 30;
  o.sampler.temperature = 0;
  std::vector<int> prompt = some_tokens(20, w.config.vocab_size, 3), cpu_out, ane_out;
  GenerateStats sc = generate(tf, prompt, o, [&](int id) { cpu_out.push_back(id); });
  GenerateStats sa = generate(ane, prompt, o, [&](int id) { ane_out.push_back(id); });
  EXPECT_EQ(sa.generated_tokens, 30);
  EXPECT_EQ(sc.generated_tokens, 30);
  size_t prefix = std::mismatch(cpu_out.begin(), cpu_out.end(), ane_out.begin()).first - cpu_out.begin();
  std::printf("[anesim] gpt2 free-running greedy: first %zu of %zu tokens identical\n", prefix, cpu_out.size());
  EXPECT_GE(prefix, 10u) << "the first tokens should agree before any near-tie can fork the paths";
}

// Prefill logits at several lengths (several buckets) against the CPU: fp16 storage at every
// op boundary, fp32 accumulation — ~1e-3 relative is typical, 2e-2 is the limit.
TEST(anesim_Generate, PrefillLogitsWithinFp16ToleranceInEveryBucket) {
  for (const ModelConfig& c : {small_gpt2(), small_llama()}) {
    ModelWeights w = sharpened(c, 44);
    Rig rig;
    AneModel ane(w, rig.cache, {arch_name(c.arch)});
    LogitError err;
    std::vector<int> buckets;
    for (int n : {2, 17, 100, 129, 200}) {
      if (n >= ane.max_seq()) continue;
      std::vector<int> prompt = some_tokens(n, c.vocab_size, uint32_t(n));
      Transformer tf(w);
      const float* lc = tf.forward(prompt.data(), n, 0);
      std::vector<float> cpu(lc, lc + c.vocab_size);
      const float* la = ane.forward(prompt.data(), n, 0);
      err.add(cpu.data(), la, c.vocab_size);
      EXPECT_EQ(argmax(cpu.data(), c.vocab_size), argmax(la, c.vocab_size)) << arch_name(c.arch) << " n=" << n;
      buckets.push_back(ane.prefill_bucket(n));
    }
    std::printf("[anesim] %s prefill logits (buckets %d..%d): max abs %.3g, max rel %.3g\n", arch_name(c.arch),
                buckets.front(), buckets.back(), err.max_abs, err.max_rel);
    EXPECT_LT(err.max_rel, 2e-2) << arch_name(c.arch);
    EXPECT_GT(err.max_abs, 0) << "bit-identical logits would mean the CPU ran, not fp16 programs";
  }
  ModelWeights w = random_weights(small_gpt2(), 1);
  Rig rig;
  AneModel ane(w, rig.cache);
  EXPECT_EQ(ane.prefill_bucket(2), 128);
  EXPECT_EQ(ane.prefill_bucket(128), 128);
  EXPECT_EQ(ane.prefill_bucket(129), 256);
}

// The smallest Stories preset: its attention needs the 1024-column bucket, far past its context.
TEST(anesim_Generate, Stories260kPrefillAndDecodeInTheWidestBucket) {
  ModelConfig c = config_preset("stories260k");
  ModelWeights w = sharpened(c, 48);
  Rig rig;
  AneModel ane(w, rig.cache, {"stories260k"});
  EXPECT_EQ(ane.attention_min_bucket(), 1024);  // k, v have 32 channels: 32 · 2 · 1024 ≥ 49,152
  EXPECT_EQ(ane.prefill_bucket(5), 1024);
  Agreement a = teacher_forced(w, ane, some_tokens(5, c.vocab_size, 4), 3);
  report("stories260k teacher-forced, 3 positions", a);
  EXPECT_EQ(a.same, a.total);
  EXPECT_LT(a.err.max_rel, 2e-2);
}

TEST(anesim_Generate, SecondPromptInTheSameBucketCompilesNothing) {
  ModelWeights w = sharpened(small_gpt2(), 45);
  Rig rig;
  AneModel ane(w, rig.cache, {"gpt2-small-test"});
  GenerateOptions o;
  o.max_new_tokens = 5;
  o.sampler.temperature = 0;
  auto ignore = [](int) {};
  generate(ane, some_tokens(10, w.config.vocab_size, 5), o, ignore);
  const runtime::CacheStats first = rig.cache.stats();
  const int compiles = rig.driver->counters().compiles;
  EXPECT_EQ(first.misses, 2 * 4 + 1) << "per layer prefill attn + ffn, decode qkv + ffn; one final norm";
  EXPECT_EQ(compiles, first.misses);
  // Another prompt in the same bucket, and another model object over the same cache: all hits.
  generate(ane, some_tokens(30, w.config.vocab_size, 6), o, ignore);
  AneModel again(w, rig.cache, {"gpt2-small-test"});
  generate(again, some_tokens(50, w.config.vocab_size, 7), o, ignore);
  const runtime::CacheStats second = rig.cache.stats();
  EXPECT_EQ(second.misses, first.misses);
  EXPECT_EQ(rig.driver->counters().compiles, compiles) << "no new compiles";
  EXPECT_GT(second.hits, first.hits);
  std::printf("[anesim] %s; %s\n", second.str().c_str(), rig.budget.str().c_str());
  // A prompt in a wider bucket compiles only that bucket's prefill programs.
  generate(ane, some_tokens(200, w.config.vocab_size, 8), o, ignore);
  EXPECT_EQ(rig.cache.stats().misses, first.misses + 2 * 2);
  // New weights (a new version) recompile and evict.
  AneModel updated(w, rig.cache, {"gpt2-small-test", 0, 1});
  updated.prepare(10);
  EXPECT_EQ(rig.cache.stats().evictions, 2 * 4 + 1);
}

TEST(anesim_Generate, ContinuationAndUsageErrors) {
  ModelWeights w = sharpened(small_llama(), 46);
  Rig rig;
  AneModel ane(w, rig.cache, {"llama-small-test", 64});
  Transformer tf(w, 64);
  std::vector<int> t = some_tokens(12, w.config.vocab_size, 9);
  // Prompt in two pieces: the second (pos > 0) goes through the decode programs token by token.
  tf.forward(t.data(), 8, 0);
  ane.forward(t.data(), 8, 0);
  const float* lc = tf.forward(t.data() + 8, 4, 8);
  const float* la = ane.forward(t.data() + 8, 4, 8);
  EXPECT_EQ(argmax(lc, w.config.vocab_size), argmax(la, w.config.vocab_size));
  int bad = w.config.vocab_size;
  EXPECT_THROW(ane.forward(&bad, 1, 12), Error);
  EXPECT_THROW(ane.forward(t.data(), 1, 64), Error);  // past the context of 64
  EXPECT_EQ(ane.max_seq(), 64);
}

// --- the command line ------------------------------------------------------------------------------

using test::run_orion;

std::string gpt2_model_dir() {
  std::string dir = test::temp_dir();
  ModelConfig c = small_gpt2();
  c.vocab_size = c.padded_vocab = 1257;  // the shipped small GPT-2 vocabulary
  save_model(random_weights(c, 47), dir + "/hf", ModelFormat::Safetensors);
  for (const char* f : {"vocab.json", "merges.txt"})
    std::filesystem::copy_file(test::data_path(std::string("tokenizer/small_gpt2/") + f), dir + "/hf/" + f);
  return dir + "/hf";
}

TEST(anesim_GenerateCli, GenerateWithBackendAnesimMatchesCpuText) {
  std::string model = gpt2_model_dir();
  std::string base = "generate --model " + model + " --prompt 'Hello world' --temperature 0 -n 12 --threads 1 ";
  std::string cpu_out, ane_out, err;
  ASSERT_EQ(run_orion(base + "--backend cpu", &cpu_out, &err), 0) << err;
  ASSERT_EQ(run_orion(base + "--backend anesim --chip m4 --verbose", &ane_out, &err), 0) << err;
  EXPECT_EQ(ane_out.rfind("Hello world", 0), 0u) << ane_out;
  EXPECT_GT(ane_out.size(), std::string("Hello world\n").size());
  std::printf("[anesim] cpu:    %s[anesim] anesim: %s", cpu_out.c_str(), ane_out.c_str());
  EXPECT_EQ(ane_out, cpu_out) << "greedy text through anesim should equal the CPU's on this model";
  EXPECT_NE(err.find("program cache:"), std::string::npos) << err;
  EXPECT_NE(err.find("compiles"), std::string::npos) << err;
  EXPECT_NE(err.find("predicted ANE"), std::string::npos) << err;
  // No ANE here: a clear error, not a crash (on macOS the driver exists and this would run).
#ifndef __APPLE__
  EXPECT_NE(run_orion(base + "--backend ane", &ane_out, &err), 0);
  EXPECT_NE(err.find("not available"), std::string::npos) << err;
#endif
  EXPECT_EQ(run_orion(base + "--backend gpu", &ane_out, &err), 2);
}

TEST(anesim_GenerateCli, BenchGenerateBackendAnesimJson) {
  std::string out, err;
  ASSERT_EQ(
      run_orion(
          "bench generate --backend anesim --config gpt2-tiny --prompt-len 16 --decode-len 8 --repeat 1 --threads 1 --json",
          &out, &err),
      0)
      << err;
  auto j = nlohmann::json::parse(out);
  std::printf("[anesim] %s\n", out.c_str());
  EXPECT_EQ(j["backend"], "anesim");
  EXPECT_EQ(j["chip"], "m4");
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(j["prefill_tok_s"].get<double>(), 0);
  EXPECT_GT(j["predicted_ane_decode_tok_s"].get<double>(), 0);
  EXPECT_GT(j["predicted_ane_prefill_tok_s"].get<double>(), 0);
  EXPECT_GT(j["compile_s"].get<double>(), 0);
  EXPECT_EQ(j["programs"].get<int>(), 2 * 4 + 1);
  EXPECT_EQ(j["cache"]["misses"].get<int>(), 2 * 4 + 1);
  EXPECT_GT(j["cache"]["hits"].get<int>(), 0);
  EXPECT_EQ(j["compile_budget"]["used"].get<int>(), 2 * 4 + 1);
}

}  // namespace
}  // namespace orion
