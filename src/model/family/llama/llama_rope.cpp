// RoPE frequencies with Hugging Face's rope_scaling (transformers' modeling_rope_utils.py).
//
// "llama3" (Llama 3.1 / 3.2: factor 8 or 32, low_freq_factor 1, high_freq_factor 4,
// original_max_position_embeddings 8192), _compute_llama3_parameters: with the wavelength of pair i
// wavelen = 2π / inv_freq[i],
//   wavelen < old / high_freq_factor   (high frequencies)  inv_freq unchanged
//   wavelen > old / low_freq_factor    (low frequencies)   inv_freq / factor
//   otherwise, with smooth = (old / wavelen − low_freq_factor) / (high_freq_factor − low_freq_factor),
//                                                          (1 − smooth)·inv_freq / factor + smooth·inv_freq
// The attention scaling of llama3 is 1, so nothing else changes.
#include <cmath>
#include <numbers>

#include "model/family/llama/llama.h"
#include "runtime/cpu/kernels.h"

namespace orion {

std::vector<float> llama_rope_frequencies(const ModelConfig& c) {
  const int HS = c.head_dim();
  std::vector<float> inv_freq(static_cast<size_t>(HS / 2));
  cpu::rope_frequencies(inv_freq.data(), HS, c.rope_theta);  // the plain ones, as llama2.c
  const RopeScaling& s = c.rope_scaling;
  if (s.kind != RopeScaling::Kind::Llama3) return inv_freq;
  const double old = s.original_max_positions;
  const double low_freq_wavelen = old / s.low_freq_factor, high_freq_wavelen = old / s.high_freq_factor;
  for (float& f : inv_freq) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < high_freq_wavelen) continue;
    if (wavelen > low_freq_wavelen) {
      f = float(f / s.factor);
      continue;
    }
    const double smooth = (old / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    f = float((1 - smooth) * f / s.factor + smooth * f);
  }
  return inv_freq;
}

}  // namespace orion
