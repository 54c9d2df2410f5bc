// The ANE passes on real kernels: every frontend kernel of a Stories (Llama) model and GPT-2
// through the standard pipeline (… legalize-ane … validate-ane) on M1, M4 and M5, and
// legalize-ane's sequence padding (C7) checked numerically through the interpreter.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/pipeline.h"
#include "ir/interpret.h"
#include "model/config.h"
#include "model/frontends/frontends.h"
#include "model/weights.h"

namespace orion::compiler {
namespace {

using ir::Graph;
using ir::Tensor32;

std::string errors_of(const PassContext& ctx) {
  std::string s;
  for (const Diagnostic& d : ctx.diagnostics)
    if (d.level == Diagnostic::Level::Error) s += d.rule + " '" + d.node + "': " + d.message + "\n";
  return s;
}

PassContext compile(Graph& g, const std::string& chip) {
  PassContext ctx;
  ctx.chip = &chip_profile(chip);
  PipelineOptions o;
  o.verify_each = true;
  run_pipeline(g, standard_pipeline(), ctx, o);
  return ctx;
}

const ModelWeights& stories() {
  static const ModelWeights w = [] {
    ModelConfig c = config_preset("stories15m");  // C = 288, H = 768, NH = 6, V = 32000
    c.n_layers = 1;
    return random_weights(c, 7);
  }();
  return w;
}

std::vector<std::pair<std::string, Graph>> stories_kernels(int S, frontends::KernelOptions opt = {}) {
  const ModelWeights& w = stories();
  return {{"fwd_attn", frontends::llama_fwd_attn(w, 0, S, opt)},
          {"fwd_ffn", frontends::llama_fwd_ffn(w, 0, S, opt)},
          {"ffn_bwd", frontends::llama_ffn_bwd(w, 0, S, opt)},
          {"sdpa_bwd1", frontends::sdpa_bwd1(w, 0, S, opt)},
          {"sdpa_bwd2", frontends::sdpa_bwd2(w.config, S, opt)},
          {"qkv_bwd", frontends::llama_qkv_bwd(w, 0, S, opt)},
          {"final_norm", frontends::final_norm(w, S, opt)},
          {"classifier_rows", frontends::classifier_fwd(w, S, 0, 8000, opt)}};
}

TEST(AneFrontends, StoriesTrainingKernelsCompileCleanOnEveryChip) {
  // S = 128: 288·128·2 = 73,728 bytes, above the minimum buffer. Every boundary is [1, C, 1, S].
  for (const std::string chip : {"m1", "m4", "m5"})
    for (auto& [name, g] : stories_kernels(128)) {
      PassContext ctx = compile(g, chip);
      EXPECT_EQ(errors_of(ctx), "") << name << " on " << chip;
      for (const ir::GraphOutput& o : g.outputs()) {
        const auto& s = g.type(o.value).shape;
        EXPECT_TRUE(s.size() == 4 && s[0] == 1 && s[2] == 1) << name << " output " << o.name;
      }
      for (int i : g.input_nodes()) EXPECT_EQ(g.node(i).results[0].shape.size(), 4u) << name;
    }
}

TEST(AneFrontends, ShortSequencePaddedWhereLocalRejectedWhereAttending) {
  // S = 64 is below the minimum for C = 288 (36,864 bytes). Kernels whose positions never mix are
  // padded to the bucket 128 (C7); attention kernels mix positions: validate-ane rejects them and
  // the caller must compile them for the bucket.
  for (auto& [name, g] : stories_kernels(64)) {
    PassContext ctx = compile(g, "m4");
    const bool attends = name == "fwd_attn" || name == "sdpa_bwd1" || name == "sdpa_bwd2" || name == "qkv_bwd";
    if (attends) {
      bool c7 = false;
      for (const Diagnostic& d : ctx.diagnostics) c7 |= d.rule == "C7";
      EXPECT_TRUE(c7) << name << ":\n" << errors_of(ctx);
      EXPECT_TRUE(ctx.ane_boundary.changes.empty()) << name;
    } else {
      EXPECT_EQ(errors_of(ctx), "") << name;
      for (int i : g.input_nodes()) EXPECT_EQ(g.node(i).results[0].shape[3], 128) << name;
      ASSERT_FALSE(ctx.ane_boundary.changes.empty()) << name;
      EXPECT_EQ(ctx.ane_boundary.changes[0].rules, (std::vector<std::string>{"C7"})) << name;
    }
  }
}

TEST(AneFrontends, C12_VocabularyClassifierRejectedOnlyPastTheChannelLimit) {
  // GPT-2's 50,257-token classifier is over the limit; legalize-ane cannot help, validate-ane says so.
  ModelConfig c = config_preset("gpt2-tiny");
  c.vocab_size = 50257, c.padded_vocab = 50304, c.n_layers = 1;
  ModelWeights w = random_weights(c, 3);
  Graph g = frontends::classifier_fwd(w, 64);
  PassContext ctx = compile(g, "m4");
  bool c12 = false;
  for (const Diagnostic& d : ctx.diagnostics) c12 |= d.rule == "C12" && d.node == g.node(g.outputs()[0].value).name;
  EXPECT_TRUE(c12) << errors_of(ctx);

  // DESIGN.md C12: the 32000-token Llama classifier is rejected too.
  Graph s = frontends::classifier_fwd(stories(), 128);
  PassContext sctx = compile(s, "m4");
  bool s12 = false;
  for (const Diagnostic& d : sctx.diagnostics) s12 |= d.rule == "C12";
  EXPECT_TRUE(s12) << errors_of(sctx);
}

// Runs g (legalized from `before`) on inputs zero-padded/reshaped to its declared shapes and cuts
// the outputs back to the original sequence, as the runtime does with ctx.ane_boundary.
std::map<std::string, Tensor32> run_like_runtime(const Graph& g, const PassContext& ctx,
                                                 const std::map<std::string, Tensor32>& in) {
  auto fit = [](const Tensor32& t, const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
    // Same bytes in [.., S] rows; a longer last axis gets zeros, a shorter one is cut.
    const int64_t S0 = from.back(), S1 = to.back(), rows = t.numel() / S0;
    Tensor32 out(to);
    for (int64_t r = 0; r < rows; r++)
      for (int64_t s = 0; s < std::min(S0, S1); s++) out.data[size_t(r * S1 + s)] = t.data[size_t(r * S0 + s)];
    return out;
  };
  std::map<std::string, Tensor32> in2;
  for (auto& [name, t] : in) {
    const BoundaryChange* c = ctx.ane_boundary.find_change(name, true);
    in2[name] = c ? fit(t, c->original.shape, c->legalized.shape) : t;
  }
  auto out = ir::interpret_named(g, in2);
  for (auto& [name, t] : out)
    if (const BoundaryChange* c = ctx.ane_boundary.find_change(name, false))
      t = fit(t, c->legalized.shape, c->original.shape);
  return out;
}

TEST(AneFrontends, LegalizedKernelsComputeTheSameInFp32) {
  // fp32 kernels (the fp16 boundary check is not the point here; only legalize-ane runs):
  // fwd_ffn, ffn_bwd and final_norm at S = 32 are padded to 64 (fp32: 288·4 bytes a position),
  // fwd_ffn's silu expanded. Outputs agree with the original graphs within 1e-5.
  frontends::KernelOptions f32{ir::ElemType::F32};
  for (auto [name, S] : {std::pair<std::string, int>{"fwd_ffn", 32}, {"ffn_bwd", 32}, {"final_norm", 32}}) {
    Graph before;
    for (auto& [n, g] : stories_kernels(S, f32))
      if (n == name) before = g;
    std::map<std::string, Tensor32> in;
    uint32_t state = 99;
    for (int i : before.input_nodes()) {
      Tensor32 t(before.node(i).results[0].shape);
      for (float& v : t.data) state = state * 1664525u + 1013904223u, v = float(state >> 8) / float(1u << 23) - 1.0f;
      in[before.node(i).name] = std::move(t);
    }
    Graph g = before;
    PassContext ctx;
    ASSERT_TRUE(make_pass("legalize-ane")->run(g, ctx)) << name;
    ASSERT_EQ(g.verify(), "") << name;
    EXPECT_FALSE(make_pass("legalize-ane")->run(g, ctx)) << name;
    auto want = ir::interpret_named(before, in), got = run_like_runtime(g, ctx, in);
    for (auto& [out, t] : want) {
      ASSERT_TRUE(got.count(out)) << name << " " << out;
      ASSERT_EQ(got[out].numel(), t.numel()) << name << " " << out;
      double worst = 0;
      for (size_t i = 0; i < t.data.size(); i++)
        worst =
            std::max(worst, double(std::fabs(t.data[i] - got[out].data[i])) / std::max(1.0, double(std::fabs(t.data[i]))));
      EXPECT_LE(worst, 1e-5) << name << " " << out;
    }
  }
}

}  // namespace
}  // namespace orion::compiler
