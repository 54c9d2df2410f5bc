#include "infer/sampler.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "runtime/cpu/kernels.h"

namespace orion {

Sampler::Sampler(SamplerOptions opt) : opt_(opt), state_(opt.seed ? opt.seed : 0x9E3779B97F4A7C15ull) {
  if (!(opt_.temperature >= 0) || !std::isfinite(opt_.temperature))
    throw_usage_error("must be ≥ 0", "temperature", "use 0 for greedy decoding");
  if (!(opt_.top_p > 0 && opt_.top_p <= 1)) throw_usage_error("must be in (0, 1]", "top-p");
  if (opt_.top_k < 0) throw_usage_error("must be ≥ 0 (0 turns it off)", "top-k");
}

int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

float Sampler::next_uniform() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return float((state_ * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}

int Sampler::sample(float* logits, int n) {
  if (opt_.temperature == 0.0f) return argmax(logits, n);
  for (int i = 0; i < n; i++) logits[i] /= opt_.temperature;
  cpu::softmax_inplace(logits, n);
  float r = next_uniform();
  if (opt_.top_k == 0 && opt_.top_p >= 1.0f) {  // plain sampling from the whole distribution
    float cdf = 0;
    for (int i = 0; i < n; i++)
      if (r < (cdf += logits[i])) return i;
    return n - 1;
  }
  // Candidates sorted by probability, cut by top-k then by top-p, renormalised.
  // Tokens below (1 − top_p)/(n − 1) can never be in the nucleus, so they are dropped before sorting.
  candidates_.clear();
  float cutoff = opt_.top_p < 1.0f ? (1.0f - opt_.top_p) / float(n - 1) : 0.0f;
  for (int i = 0; i < n; i++)
    if (logits[i] >= cutoff) candidates_.emplace_back(logits[i], i);
  if (candidates_.empty()) return argmax(logits, n);
  auto by_prob = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (opt_.top_k > 0 && size_t(opt_.top_k) < keep) {
    keep = size_t(opt_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + long(keep), candidates_.end(), by_prob);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_prob);
  }
  float total = 0;
  size_t last = keep;
  for (size_t i = 0; i < keep; i++) {
    total += candidates_[i].first;
    if (total >= opt_.top_p) {
      last = i + 1;
      break;
    }
  }
  float target = r * total, cdf = 0;
  for (size_t i = 0; i < last; i++)
    if (target < (cdf += candidates_[i].first)) return candidates_[i].second;
  return candidates_[last - 1].second;
}

}  // namespace orion
