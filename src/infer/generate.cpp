#include "infer/generate.h"

#include <algorithm>

#include "base/error.h"
#include "base/timer.h"

namespace orion {

GenerateStats generate(LanguageModel& model, const std::vector<int>& prompt, const GenerateOptions& options,
                       const std::function<void(int)>& on_token) {
  if (prompt.empty()) throw_usage_error("the prompt encodes to no tokens", "prompt", "give a non-empty prompt");
  if (int(prompt.size()) >= model.max_seq())
    throw_usage_error(fmt::format("the prompt has {} tokens; the model's context is {}", prompt.size(), model.max_seq()),
                      "prompt", "shorten the prompt");
  const int cached = options.cached_prompt_tokens;
  ORION_CHECK(cached >= 0 && cached < int(prompt.size()), "cached prompt tokens {} of {}", cached, prompt.size());
  GenerateStats st;
  st.prompt_tokens = int(prompt.size()) - cached;
  Sampler sampler(options.sampler);
  const int V = model.vocab_size();
  std::vector<float> logits(static_cast<size_t>(V));
  // Each forward pass adds one position; the last sampled token needs no pass of its own.
  int budget = std::min(options.max_new_tokens, model.max_seq() - int(prompt.size()) + 1);

  Timer t;
  const float* lg = model.forward(prompt.data() + cached, st.prompt_tokens, cached);
  st.prefill_seconds = t.seconds();

  t.reset();
  int pos = int(prompt.size());
  for (int i = 0; i < budget; i++) {
    std::copy(lg, lg + V, logits.begin());
    int next = sampler.sample(logits.data(), V);
    st.generated_tokens++;
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end()) {
      st.stopped_at_eos = true;
      break;
    }
    on_token(next);
    if (i + 1 == budget) break;
    lg = model.forward(&next, 1, pos++);
  }
  st.decode_seconds = t.seconds();
  return st;
}

GenerateStats generate(Transformer& model, const std::vector<int>& prompt, const GenerateOptions& options,
                       const std::function<void(int)>& on_token) {
  CpuLanguageModel cpu(model);
  return generate(static_cast<LanguageModel&>(cpu), prompt, options, on_token);
}

}  // namespace orion
