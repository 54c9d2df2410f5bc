// Text generation: prefill the prompt (one matrix–matrix pass), then decode one token at a time
// with the KV cache, sampling each next token, streaming it out, stopping at end-of-sequence or
// after max_new_tokens.
#pragma once
#include <functional>
#include <vector>

#include "infer/language_model.h"
#include "infer/sampler.h"
#include "model/transformer.h"

namespace orion {

struct GenerateOptions {
  int max_new_tokens = 256;
  SamplerOptions sampler;
  // Token ids that end generation (EOS; for llama2.c models also BOS, which separates stories).
  std::vector<int> stop_ids;
  // The first cached_prompt_tokens tokens of the prompt are already in the model's KV cache, fed
  // by an earlier generate() of the same sequence (a chat turn continues the conversation so far):
  // the prefill feeds only the rest, from that position. 0: a fresh sequence.
  int cached_prompt_tokens = 0;
};

struct GenerateStats {
  int prompt_tokens = 0;      // tokens the prefill fed (the prompt less its cached prefix)
  int generated_tokens = 0;  // sampled tokens, including a final stop token
  double prefill_seconds = 0, decode_seconds = 0;
  bool stopped_at_eos = false;
  double prefill_tok_per_s() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  // Decode rate counts the forward passes after the prefill (each produces one next token).
  double decode_tok_per_s() const {
    return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0;
  }
};

// Runs generation from `prompt` (must be non-empty). on_token(id) is called for every sampled
// token as soon as it is chosen (not for the stop token). The prompt plus the new tokens must
// fit in the model's context: max_new_tokens is cut to what fits. The model may compute on the
// CPU or through ANE programs (infer/language_model.h); sampling is always on the CPU.
GenerateStats generate(LanguageModel& model, const std::vector<int>& prompt, const GenerateOptions& options,
                       const std::function<void(int)>& on_token);
// The same on the CPU reference.
GenerateStats generate(Transformer& model, const std::vector<int>& prompt, const GenerateOptions& options,
                       const std::function<void(int)>& on_token);

}  // namespace orion
