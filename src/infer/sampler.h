// Choosing the next token from logits: greedy (temperature 0), or temperature + top-k + top-p
// (nucleus) sampling with a seeded generator, so the same seed gives the same text.
#pragma once
#include <cstdint>
#include <vector>

namespace orion {

struct SamplerOptions {
  float temperature = 1.0f;  // 0 → greedy (argmax)
  float top_p = 0.9f;        // keep the smallest set of tokens whose probability sums to ≥ top_p; 1 → off
  int top_k = 0;             // keep the k most likely tokens; 0 → off
  uint64_t seed = 42;
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions opt);
  // logits: [n]; may be modified (scaled, softmaxed) in place.
  int sample(float* logits, int n);
  const SamplerOptions& options() const { return opt_; }

 private:
  float next_uniform();  // [0, 1), xorshift64* as in llama2.c
  SamplerOptions opt_;
  uint64_t state_;
  std::vector<std::pair<float, int>> candidates_;
};

int argmax(const float* x, int n);  // first index of the largest value

}  // namespace orion
