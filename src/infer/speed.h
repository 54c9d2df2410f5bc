// Measuring generation speed on random weights of a named config (no files needed), or on a model
// file as `orion generate` loads it: the figures behind `orion bench generate` and `orion demo`,
// with the memory-bandwidth bound beside them
// (CPU backend), or with compile time, program-cache statistics and anesim's predicted ANE time
// (ANE backends: the transformer blocks as compiled programs, infer/ane_model.h).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "model/config.h"
#include "model/family/decode_profile.h"

namespace orion {

struct SpeedOptions {
  std::string config = "stories110m";  // random weights of this preset, unless `model` names a file
  std::string model;                    // a model file (any format load_model reads), memory-mapped as
                                        // `orion generate` maps it: the speed of the weights a user has
  std::optional<DType> dtype;           // random weights: f32 unless set; a file: as stored unless set
  DType kv_cache = DType::F32;  // the KV cache's elements (CPU backend): F32 or F16
  int prompt_tokens = 128;
  int decode_tokens = 128;
  int repeat = 3;                 // best of this many runs
  int streams = 1;                // > 1 (CPU backend): also decode that many sequences together, as `orion serve` does
  bool measure_bandwidth = true;  // CPU backend only
  bool measure_gemm = true;       // CPU backend only: the GEMM peak behind the prefill bound
  bool phases = false;            // CPU backend only: where the decode steps' time goes (DecodeProfile)
  uint64_t seed = 1;
  std::string backend = "cpu";  // "cpu", "anesim", or "ane" (macOS)
  std::string chip = "m4";      // the ANE generation anesim models
};

// The ANE backends' figures. Host tok/s (SpeedReport) is what this machine took — on anesim, the
// software ANE's own compute; predicted tok/s is what anesim's timing model says the ANE programs
// would take on the chip (dispatch, compute and host ↔ surface copies of every evaluation; the
// CPU's share — embedding, decode attention, classifier — is not in it). The hardware driver
// predicts nothing (0).
struct AneSpeed {
  std::string chip;
  int programs = 0;  // distinct programs the prefill and decode use
  int prefill_bucket = 0, attention_min_bucket = 0;
  double compile_s = 0;                // compiling and loading them (cache misses)
  double first_prefill_tok_s = 0;      // the first prefill, compiles included
  double predicted_prefill_tok_s = 0;  // prompt tokens / predicted ANE time of the prefill
  double predicted_decode_tok_s = 0;   // decode tokens / predicted ANE time of the decode steps
  int64_t evaluations_per_decode_token = 0;
  int64_t cache_hits = 0, cache_misses = 0, cache_evictions = 0, cache_resident = 0;
  int compiles_used = 0, compile_budget = 0;
  std::string cache_line, budget_line;  // one-line summaries as --verbose prints them
};

struct SpeedReport {
  ModelConfig config;
  std::string config_name, dtype, isa;  // config_name: the preset, or the model file's path
  std::string kv_cache = "f32";  // the KV cache's elements (CPU)
  int threads = 0, prompt_tokens = 0, decode_tokens = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  double weight_bytes = 0;          // matrix bytes streamed per decode step
  double bytes_per_token = 0;       // weights + KV cache at the mean decode position
  // The decode bound: the read bandwidth measured between the best decode run's tokens (0 if not
  // measured: all threads reading exactly a token's bytes, cpu::time_read_pass, the median of the
  // run's passes) over bytes_per_token. The STREAM triad is reported beside it.
  double read_gb_s = 0;
  double stream_triad_gb_s = 0;
  double bound_tok_s = 0;           // read_gb_s / bytes_per_token
  double bandwidth_efficiency = 0;  // decode_tok_s / bound_tok_s
  // Prefill against the compute bound: 2·params FLOPs per token at the best GEMM rate this run
  // measured on a prompt-shaped product [prompt, C]·[H, C]ᵀ: fp32 (Orion's kernels or the library's),
  // and with q8_0 weights also Orion's int8 kernels.
  std::string prefill_gemm;               // the path prompt products took: "orion" or "onednn"
  double gemm_orion_gflops = 0, gemm_library_gflops = 0;  // 0: not measured / not built
  double gemm_q8_gflops = 0;                               // 0: not measured (weights not q8_0)
  double prefill_bound_tok_s = 0, prefill_efficiency = 0;
  // Batched decode (streams > 1): `streams` sequences, each prefilled with its own prompt, decode
  // together through the server's engine (infer/batched_decode.h), one pass over the weights per
  // step for all of them. Its bound: a step reads the weights once and each stream's KV cache, at
  // read_gb_s, and does 2·params FLOPs per stream at the GEMM peak — whichever takes longer.
  int streams = 1;
  double batched_tok_s = 0;        // all streams' tokens per second
  double batched_bound_tok_s = 0;  // 0: not measured
  double batched_efficiency = 0;
  // opt.phases: the best decode run's time per token in each phase of decode_step, per thread
  // ([thread][DecodeProfile::Phase], µs).
  std::vector<std::array<double, DecodeProfile::kPhases>> decode_phase_us;
  // and the bytes a token reads in each phase at the mean decode position (summing to bytes_per_token;
  // the waits read none), so that each phase's rate can be set against the read pass.
  std::array<double, DecodeProfile::kPhases> decode_phase_bytes{};
  uint64_t peak_rss_bytes = 0;      // the process's peak resident memory after the runs
  std::string backend = "cpu";
  AneSpeed ane;  // backend != "cpu"
  std::string to_json() const;
  std::string to_text() const;
};

// on_progress(message) is called with short status lines while it works.
SpeedReport measure_generation_speed(const SpeedOptions& opt, void (*on_progress)(const char*) = nullptr);
// The ANE backends' half (speed_ane.cpp): measure_generation_speed checks the options, fills r's
// header (config, dtype, threads, token counts), makes or loads the weights and hands over when
// opt.backend is not "cpu".
struct ModelWeights;
SpeedReport measure_ane_generation_speed(const SpeedOptions& opt, SpeedReport r, const ModelWeights& w,
                                         void (*on_progress)(const char*));

}  // namespace orion
