// Measuring generation speed on random weights of a named config (no files needed): the figures
// behind `orion bench generate` and `orion demo`, with the memory-bandwidth bound beside them.
#pragma once
#include <string>

#include "base/dtype.h"
#include "model/config.h"

namespace orion {

struct SpeedOptions {
  std::string config = "stories110m";
  DType dtype = DType::F32;
  int prompt_tokens = 128;
  int decode_tokens = 128;
  int repeat = 3;          // best of this many runs
  bool measure_bandwidth = true;
  uint64_t seed = 1;
};

struct SpeedReport {
  ModelConfig config;
  std::string config_name, dtype, isa;
  int threads = 0, prompt_tokens = 0, decode_tokens = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  double weight_bytes = 0;          // matrix bytes streamed per decode step
  double bytes_per_token = 0;       // weights + KV cache at the mean decode position
  double stream_triad_gb_s = 0;     // measured in the same run (0 if not measured)
  double bound_tok_s = 0;           // stream_triad / bytes_per_token
  double bandwidth_efficiency = 0;  // decode_tok_s / bound_tok_s
  std::string to_json() const;
  std::string to_text() const;
};

// on_progress(message) is called with short status lines while it works.
SpeedReport measure_generation_speed(const SpeedOptions& opt, void (*on_progress)(const char*) = nullptr);

}  // namespace orion
