// Every frontend kernel through the real path — build (fp16) → compiler::compile_graph →
// anesim compile / load / evaluate — against the same kernel built in fp32 and run by the reference
// interpreter. The difference is anesim's fp16 storage (rounding at every op boundary); it must
// stay within fp16 tolerance. Prints the max absolute and relative error of every output.
//
// Models: widths chosen so that every boundary tensor meets the C7 minimum at S = 64 (validate-ane
// rejects smaller ones): C = 768, 12 heads (Llama with 6 kv heads: GQA), FFN 1024, vocabulary 512,
// LoRA rank 64.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "anesim_test_util.h"
#include "base/timer.h"
#include "model/frontend_test_util.h"
#include "model/frontends/lora_frontends.h"

namespace orion::runtime::anesim {
namespace {

using namespace orion::frontends;
using ir::Graph;
using ir::Tensor32;

constexpr int S = 64, kRank = 64;

ModelConfig config(Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 768, c.hidden_dim = 1024, c.n_layers = 1, c.n_heads = 12;
  c.n_kv_heads = arch == Arch::GPT2 ? 12 : 6;
  c.vocab_size = c.padded_vocab = 512, c.seq_len = S;
  c.validate("test");
  return c;
}
const ModelWeights& gpt2() {
  static const ModelWeights w = test::test_weights(config(Arch::GPT2), 11, 1.0f);
  return w;
}
const ModelWeights& llama() {
  static const ModelWeights w = test::test_weights(config(Arch::Llama), 12, 1.0f);
  return w;
}

// One kernel, built by `build` at the precision asked for.
struct Kernel {
  std::string name;
  std::function<Graph(KernelOptions)> build;
};

std::vector<Kernel> every_kernel() {
  const float alpha = 16.0f;
  return {
      {"gpt2_prefill_attn", [](KernelOptions o) { return gpt2_prefill_attn(gpt2(), 0, S, o); }},
      {"gpt2_prefill_ffn", [](KernelOptions o) { return gpt2_prefill_ffn(gpt2(), 0, S, o); }},
      {"gpt2_decode_qkv", [](KernelOptions o) { return gpt2_decode_qkv(gpt2(), 0, S, o); }},
      {"gpt2_decode_ffn", [](KernelOptions o) { return gpt2_decode_ffn(gpt2(), 0, S, o); }},
      {"final_norm_gpt2", [](KernelOptions o) { return final_norm(gpt2(), S, o); }},
      {"final_norm_llama", [](KernelOptions o) { return final_norm(llama(), S, o); }},
      {"llama_fwd_attn", [](KernelOptions o) { return llama_fwd_attn(llama(), 0, S, o); }},
      {"llama_fwd_ffn", [](KernelOptions o) { return llama_fwd_ffn(llama(), 0, S, o); }},
      {"llama_ffn_bwd", [](KernelOptions o) { return llama_ffn_bwd(llama(), 0, S, o); }},
      {"sdpa_bwd1", [](KernelOptions o) { return sdpa_bwd1(llama(), 0, S, o); }},
      {"sdpa_bwd2", [](KernelOptions o) { return sdpa_bwd2(llama().config, S, o); }},
      {"llama_qkv_bwd", [](KernelOptions o) { return llama_qkv_bwd(llama(), 0, S, o); }},
      {"gpt2_fwd_attn", [](KernelOptions o) { return gpt2_fwd_attn(gpt2(), 0, S, o); }},
      {"gpt2_fwd_ffn", [](KernelOptions o) { return gpt2_fwd_ffn(gpt2(), 0, S, o); }},
      {"gpt2_ffn_bwd", [](KernelOptions o) { return gpt2_ffn_bwd(gpt2(), 0, S, o); }},
      {"gpt2_sdpa_bwd1", [](KernelOptions o) { return sdpa_bwd1(gpt2(), 0, S, o); }},
      {"gpt2_qkv_bwd", [](KernelOptions o) { return gpt2_qkv_bwd(gpt2(), 0, S, o); }},
      {"classifier_fwd", [](KernelOptions o) { return classifier_fwd(llama(), S, 0, -1, o); }},
      {"vocab_softmax", [](KernelOptions o) { return vocab_softmax(512, S, o); }},
      {"lora_linear",
       [=](KernelOptions o) { return lora_linear(gpt2().layers[0].w1, gpt2().layers[0].b1, kRank, alpha, S, o); }},
      {"lora_attention_gpt2", [=](KernelOptions o) { return lora_attention(gpt2(), 0, S, kRank, alpha, o); }},
      {"lora_attention_llama", [=](KernelOptions o) { return lora_attention(llama(), 0, S, kRank, alpha, o); }},
      {"llama_lora_fwd_attn", [](KernelOptions o) { return llama_lora_fwd_attn(llama(), 0, S, kRank, o); }},
      {"llama_lora_qkv_bwd", [](KernelOptions o) { return llama_lora_qkv_bwd(llama(), 0, S, kRank, o); }},
      {"gpt2_lora_fwd_attn", [](KernelOptions o) { return gpt2_lora_fwd_attn(gpt2(), 0, S, kRank, o); }},
      {"gpt2_lora_qkv_bwd", [](KernelOptions o) { return gpt2_lora_qkv_bwd(gpt2(), 0, S, kRank, o); }},
  };
}

// Random fp16-valued inputs for every input of g (adapters small, as trained ones are).
std::map<std::string, Tensor32> inputs_for(const Graph& g) {
  std::map<std::string, Tensor32> in;
  uint32_t seed = 100;
  for (int i : g.input_nodes()) {
    const ir::Node& n = g.node(i);
    const bool adapter = n.name.rfind("lora_", 0) == 0;
    in[n.name] = test::random_t(n.results[0].shape, seed++, adapter ? 0.05f : 1.0f);
  }
  return in;
}

// Runs the fp16 kernel as the runtime would on anesim: legalized boundaries (C7 padding, C14
// flattening) filled from the original tensors, surfaces of the binding tables' sizes.
struct AnesimRun {
  std::map<std::string, Tensor32> outputs;
  ProgramCost cost;
  double compile_s = 0, eval_s = 0;  // host time: compile_graph + anesim compile/load, evaluate
};
AnesimRun run_on_anesim(Graph g, const std::map<std::string, Tensor32>& in, AnesimDriver& d) {
  AnesimRun run;
  Timer timer;
  std::map<std::string, std::vector<int64_t>> out_shapes;
  for (const ir::GraphOutput& o : g.outputs()) out_shapes[o.name] = g.type(o.value).shape;
  compiler::CompileResult r = compiler::compile_graph(g, d.chip());
  EXPECT_TRUE(r.boundary.output_splits.empty());
  auto p = d.compile(r.program.mil_text, r.program.weights, g.name());
  d.load(*p);
  run.cost = d.cost(*p);
  test::Surfaces ins = test::make_surfaces(r.program.inputs.bindings.size(), size_t(r.program.inputs.alloc_bytes));
  test::Surfaces outs = test::make_surfaces(r.program.outputs.bindings.size(), size_t(r.program.outputs.alloc_bytes));
  EXPECT_EQ(p->input_names(), r.program.inputs.names());
  for (size_t k = 0; k < ins.s.size(); k++) {
    const compiler::Binding& b = r.program.inputs.bindings[k];
    const Tensor32 t = test::fit_rows(in.at(b.name), b.type.shape);
    ins.s[k].write_f32(t.data.data(), t.data.size());
  }
  run.compile_s = timer.seconds();
  timer.reset();
  d.evaluate(*p, ins.ptrs(), outs.ptrs());
  run.eval_s = timer.seconds();
  for (size_t k = 0; k < outs.s.size(); k++) {
    const compiler::Binding& b = r.program.outputs.bindings[k];
    run.outputs[b.name] = test::fit_rows(test::read_surface(outs.s[k], b.type.shape), out_shapes.at(b.name));
  }
  return run;
}

// Relative error (max |anesim − fp32| / max |fp32|) allowed per output. fp16 has a unit roundoff
// of 2^-11 ≈ 4.9e-4; these kernels (up to ~70 rounded ops, norms, softmaxes) measure ≤ 1.5e-3.
constexpr double kTolerance = 1e-2;

class anesim_Frontends : public ::testing::TestWithParam<Kernel> {};

TEST_P(anesim_Frontends, MatchesTheFp32InterpreterOnM4M1M5) {
  // M4: program(1.3); M1: program(1.0), verbose literals, no cast; M5: program(1.5), 128-byte
  // alignment (C18). The fp32 reference is computed once.
  const Kernel& k = GetParam();
  Graph g32 = k.build({ir::ElemType::F32});
  const auto in = inputs_for(g32);
  const auto want = ir::interpret_named(g32, in);
  for (const std::string chip : {"m4", "m1", "m5"}) {
    SCOPED_TRACE(k.name + " on " + chip);
    AnesimDriver d(DriverOptions{&compiler::chip_profile(chip)});
    const AnesimRun run = run_on_anesim(k.build({ir::ElemType::F16}), in, d);
    ASSERT_EQ(run.outputs.size(), want.size());
    for (const auto& [name, w] : want) {
      ASSERT_TRUE(run.outputs.count(name)) << name;
      const test::ErrorStats e = test::compare(run.outputs.at(name), w);
      std::printf(
          "  %-20s %-2s %-7s max|err| %.3e  max|ref| %.3e  rel %.3e  | %2d ops %6.1f MFLOP, ANE %.3f ms predicted, "
          "host %.0f ms eval %.0f ms compile\n",
          k.name.c_str(), chip.c_str(), name.c_str(), e.max_abs, e.max_ref, e.rel(), run.cost.ops, run.cost.flops / 1e6,
          predict_evaluation(run.cost, d.chip()).total_ms, run.eval_s * 1e3, run.compile_s * 1e3);
      EXPECT_GT(e.max_ref, 0.0) << name << " is all zeros: the comparison would prove nothing";
      EXPECT_LE(e.rel(), kTolerance) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, anesim_Frontends, ::testing::ValuesIn(every_kernel()),
                         [](const ::testing::TestParamInfo<Kernel>& i) { return i.param.name; });

}  // namespace
}  // namespace orion::runtime::anesim
