// The set of ANE programs a model needs, by family (DESIGN.md §3):
//   GPT-2 inference: per layer prefill attention + FFN and decode projections + FFN, then the
//                    final LayerNorm (4·L + 1 programs);
//   Llama / Stories training: per layer fwd_attn, fwd_ffn, ffn_bwd, sdpa_bwd1, sdpa_bwd2, qkv_bwd,
//                    then the final RMSNorm (6·L + 1), plus the classifier when the vocabulary fits
//                    the ANE's channel limit (C12) — otherwise it stays on the CPU.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "model/weights.h"

namespace orion::frontends {

struct ProgramSpec {
  std::string name;   // "layer03.prefill_attn", ...: unique, usable as a folder name
  std::string kernel; // "gpt2_prefill_attn", ...
  int layer = -1;     // −1 for whole-model kernels
  std::function<ir::Graph()> build;  // builds the IR on demand (weights are baked in as constants)
};

// S is the sequence bucket the programs are built for (decode kernels use the minimum bucket).
std::vector<ProgramSpec> model_programs(const ModelWeights& w, int S, int64_t max_conv_channels);

}  // namespace orion::frontends
