// Llama 3's RoPE scaling in GGUF files. llama.cpp keeps no rope_scaling numbers for it: its converter
// stores the tensor rope_freqs.weight [HS/2] (F32), a divisor per frequency pair, and ggml's RoPE
// divides each plain frequency θ^(−2i/HS) by it. With transformers' llama3 rule (llama_rope.cpp):
//   high frequencies (wavelength < old / high_freq_factor)  1
//   low frequencies  (wavelength > old / low_freq_factor)   factor
//   in between, smooth = (old / wavelength − low) / (high − low)   1 / ((1 − smooth) / factor + smooth)
// so the divisors are plain[i] / scaled[i] of Orion's own frequencies.
//
// Reading goes back from the divisors to the four numbers Orion computes with. Only their ratios
// show in the divisors ((old, low, high) and (k·old, k·low, k·high) give the same ones), so low is
// taken as 1 and high as 4 — the values of every Llama 3.x release and llama.cpp's defaults — factor
// is the last divisor and old follows from a pair in the smooth band (or, with none, from the band
// edges). The result is checked by computing the divisors again: a file whose divisors are not this
// rule (another scaling written as rope_freqs) is refused, not run with the wrong frequencies.
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "base/error.h"
#include "model/family/llama/llama.h"
#include "model/io/io_internal.h"

namespace orion::io {

namespace {

constexpr float kLowFreqFactor = 1, kHighFreqFactor = 4;
constexpr double kTolerance = 1e-5;  // relative; the divisors are f32 quotients of f32 frequencies

bool near(double a, double b) { return std::fabs(a - b) <= kTolerance * std::fabs(b); }

// The plain frequencies' wavelengths 2π / θ^(−2i/HS), as llama_rope_frequencies sees them.
std::vector<double> wavelengths(const ModelConfig& c) {
  ModelConfig plain = c;
  plain.rope_scaling = {};
  std::vector<double> out;
  for (float f : llama_rope_frequencies(plain)) out.push_back(2 * std::numbers::pi / f);
  return out;
}

// original_max_positions from the divisors, given factor and low = 1, high = 4; 0 when none fits.
int original_positions(const std::vector<float>& d, const std::vector<double>& wl, float factor) {
  for (size_t i = 0; i < d.size(); i++) {
    if (near(d[i], 1) || near(d[i], factor)) continue;
    // 1/d = (1 − s)/factor + s  ⇒  s;  s = (old/wl − low)/(high − low)  ⇒  old.
    const double s = (1.0 / d[i] - 1.0 / factor) / (1.0 - 1.0 / factor);
    return int(std::lround(wl[i] * (s * (kHighFreqFactor - kLowFreqFactor) + kLowFreqFactor)));
  }
  // No pair in the smooth band: any old with high-band wavelengths < old / 4 and low-band ones
  // > old / 1 gives these divisors; Meta's 8192 when it is one of them.
  double lo = 0, hi = 1e12;
  for (size_t i = 0; i < d.size(); i++) {
    if (near(d[i], 1)) lo = std::max(lo, wl[i] * kHighFreqFactor);
    else hi = std::min(hi, wl[i] * kLowFreqFactor);
  }
  if (lo < 8192 && 8192 < hi) return 8192;
  const double old = std::floor(lo) + 1;
  return old < hi && old < (1 << 30) ? int(old) : 0;
}

}  // namespace

std::vector<float> llama3_rope_divisors(const ModelConfig& c) {
  ModelConfig plain = c;
  plain.rope_scaling = {};
  const std::vector<float> p = llama_rope_frequencies(plain), s = llama_rope_frequencies(c);
  std::vector<float> d(p.size());
  for (size_t i = 0; i < d.size(); i++) d[i] = p[i] / s[i];
  return d;
}

RopeScaling llama3_scaling_from_divisors(const ModelConfig& c, const std::vector<float>& d, const std::string& path,
                                         const std::string& field) {
  const size_t pairs = size_t(c.head_dim() / 2);
  if (d.size() != pairs)
    throw_input_error(path, fmt::format("{} elements, expected one per RoPE frequency pair ({})", d.size(), pairs), field);
  bool all_one = true;
  for (float x : d) {
    if (!(x >= 1) || !std::isfinite(x))
      throw_input_error(path, fmt::format("a RoPE frequency divisor of {} (Llama 3's are ≥ 1 and finite)", x), field);
    all_one = all_one && near(x, 1);
  }
  if (all_one) return {};  // divisors of 1: the plain frequencies
  RopeScaling rs{RopeScaling::Kind::Llama3, d.back(), kLowFreqFactor, kHighFreqFactor, 0};
  rs.original_max_positions = original_positions(d, wavelengths(c), rs.factor);
  ModelConfig scaled = c;
  scaled.rope_scaling = rs;
  const std::vector<float> again = rs.original_max_positions > 0 ? llama3_rope_divisors(scaled) : std::vector<float>{};
  for (size_t i = 0; i < pairs; i++)
    if (again.empty() || !near(d[i], again[i]))
      throw_input_error(path,
                        fmt::format("the RoPE frequency divisors are not Llama 3's scaling (pair {}: {}, the llama3 rule "
                                    "with factor {}, low_freq_factor 1, high_freq_factor 4 gives {})",
                                    i, d[i], rs.factor, again.empty() ? 0.0f : again[i]),
                        field, -1, "convert the original checkpoint (safetensors), whose config.json says its scaling");
  return rs;
}

}  // namespace orion::io
