// Every frontend kernel (13 + 2, tiny random-weight models), after the standard pass pipeline for
// each chip, emits MIL that parses back into a graph that emits the same bytes (text and blobs).
#include <gtest/gtest.h>

#include "compiler/mil/emit_mil.h"
#include "compiler/mil/parse_mil.h"
#include "compiler/pipeline.h"
#include "model/frontend_test_util.h"

namespace orion::compiler {
namespace {

using namespace orion::frontends;
using test::test_weights;
using test::tiny_config;

std::vector<std::pair<std::string, ir::Graph>> every_kernel(int S) {
  ModelWeights gpt = test_weights(tiny_config(Arch::GPT2), 1, 1.0f);
  ModelWeights llama = test_weights(tiny_config(Arch::Llama, 2), 2, 1.0f);
  const Tensor& wq = gpt.layers[0].wq;
  return {
      {"gpt2_prefill_attn", gpt2_prefill_attn(gpt, 0, S)},
      {"gpt2_prefill_ffn", gpt2_prefill_ffn(gpt, 1, S)},
      {"gpt2_decode_qkv", gpt2_decode_qkv(gpt, 0, S)},
      {"gpt2_decode_ffn", gpt2_decode_ffn(gpt, 0, S)},
      {"final_norm", final_norm(gpt, S)},
      {"llama_fwd_attn", llama_fwd_attn(llama, 0, S)},
      {"llama_fwd_ffn", llama_fwd_ffn(llama, 0, S)},
      {"llama_ffn_bwd", llama_ffn_bwd(llama, 0, S)},
      {"sdpa_bwd1", sdpa_bwd1(llama, 0, S)},
      {"sdpa_bwd2", sdpa_bwd2(llama.config, S)},
      {"llama_qkv_bwd", llama_qkv_bwd(llama, 0, S)},
      {"classifier_fwd", classifier_fwd(llama, S)},
      {"vocab_softmax", vocab_softmax(80, S)},
      {"lora_linear", lora_linear(wq, gpt.layers[0].bq, 4, 8.0f, S)},
      {"lora_attention", lora_attention(llama, 0, S, 4, 8.0f)},
  };
}

TEST(MilFrontends, EveryKernelRoundTripsOnEveryChip) {
  for (const std::string& chip : chip_names()) {
    for (auto& [name, graph] : every_kernel(16)) {
      SCOPED_TRACE(name + " on " + chip);
      ir::Graph g = graph;
      PassContext ctx;
      ctx.chip = &chip_profile(chip);
      run_pipeline(g, standard_pipeline(), ctx);
      CompiledProgram p1 = emit_mil(g, *ctx.chip);
      EXPECT_GT(p1.mil_text.size(), 200u);
      ir::Graph back = parse_mil(p1.mil_text, p1.weights, name + ".mil");
      EXPECT_EQ(back.verify(), "");
      CompiledProgram p2 = emit_mil(back, *ctx.chip);
      EXPECT_EQ(p1.mil_text, p2.mil_text);
      EXPECT_EQ(p1.weights, p2.weights);
      EXPECT_EQ(p1.blob_constants + p1.inline_constants, p2.blob_constants + p2.inline_constants);
    }
  }
}

}  // namespace
}  // namespace orion::compiler
