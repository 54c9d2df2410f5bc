#include "model/frontends/program_set.h"

#include <fmt/format.h>

#include "model/frontends/frontends.h"

namespace orion::frontends {

std::vector<ProgramSpec> model_programs(const ModelWeights& w, int S, int64_t max_conv_channels) {
  std::vector<ProgramSpec> out;
  const ModelConfig& c = w.config;
  auto add = [&](int layer, const char* kernel, std::function<ir::Graph()> build) {
    std::string name = layer >= 0 ? fmt::format("layer{:02}.{}", layer, kernel) : std::string(kernel);
    out.push_back({name, kernel, layer, std::move(build)});
  };
  const ModelWeights* pw = &w;
  if (c.arch == Arch::GPT2) {
    const int decode_S = 16;  // one token in column 0 of the smallest bucket (C7)
    for (int l = 0; l < c.n_layers; l++) {
      add(l, "prefill_attn", [=] { return gpt2_prefill_attn(*pw, l, S); });
      add(l, "prefill_ffn", [=] { return gpt2_prefill_ffn(*pw, l, S); });
      add(l, "decode_qkv", [=] { return gpt2_decode_qkv(*pw, l, decode_S); });
      add(l, "decode_ffn", [=] { return gpt2_decode_ffn(*pw, l, decode_S); });
    }
  } else {
    for (int l = 0; l < c.n_layers; l++) {
      add(l, "fwd_attn", [=] { return stories_fwd_attn(*pw, l, S); });
      add(l, "fwd_ffn", [=] { return stories_fwd_ffn(*pw, l, S); });
      add(l, "ffn_bwd", [=] { return stories_ffn_bwd(*pw, l, S); });
      add(l, "sdpa_bwd1", [=] { return stories_sdpa_bwd1(*pw, l, S); });
      add(l, "sdpa_bwd2", [=] { return stories_sdpa_bwd2(pw->config, S); });
      add(l, "qkv_bwd", [=] { return stories_qkv_bwd(*pw, l, S); });
    }
  }
  add(-1, "final_norm", [=] { return final_norm(*pw, S); });
  if (c.vocab_size <= max_conv_channels) add(-1, "classifier", [=] { return classifier_fwd(*pw, S); });
  return out;
}

}  // namespace orion::frontends
