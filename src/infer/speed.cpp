#include "infer/speed.h"

#include <algorithm>
#include <functional>
#include <vector>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/memory_usage.h"
#include "base/timer.h"
#include "infer/batched_decode.h"
#include "model/io/model_io.h"
#include "model/transformer.h"
#include "runtime/cpu/kernels.h"

namespace orion {
namespace {

// The best aggregate tok/s of `opt.repeat` runs of opt.streams sequences decoding together: each
// prefilled with its own random prompt, then opt.decode_tokens steps of one greedy token each.
double measure_batched_decode(const SpeedOptions& opt, const ModelWeights& w, std::mt19937& rng,
                              const std::function<void(const std::string&)>& say) {
  const int N = opt.streams, V = w.config.vocab_size;
  BatchedDecoder dec(w, N, opt.prompt_tokens + opt.decode_tokens, opt.kv_cache);
  std::vector<int> prompt(static_cast<size_t>(opt.prompt_tokens)), next(static_cast<size_t>(N));
  double best = 0;
  for (int rep = 0; rep < opt.repeat; rep++) {
    say(fmt::format("run {}/{}: {} streams, each a {}-token prompt, then {} steps of {} tokens", rep + 1, opt.repeat, N,
                    opt.prompt_tokens, opt.decode_tokens, N));
    for (int s = 0; s < N; s++) {
      for (int& t : prompt) t = int(rng() % uint32_t(V));
      const float* lg = dec.prefill(s, prompt.data(), opt.prompt_tokens, nullptr);
      next[size_t(s)] = int(std::max_element(lg, lg + V) - lg);
    }
    std::vector<SlotDecoder::Row> rows(static_cast<size_t>(N));
    Timer t;
    for (int i = 0; i < opt.decode_tokens; i++) {
      for (int s = 0; s < N; s++) rows[size_t(s)] = {.slot = s, .token = next[size_t(s)], .pos = opt.prompt_tokens + i};
      const float* lg = dec.decode(rows);
      for (int s = 0; s < N; s++)
        next[size_t(s)] = int(std::max_element(lg + size_t(s) * V, lg + size_t(s + 1) * V) - (lg + size_t(s) * V));
    }
    best = std::max(best, double(N) * opt.decode_tokens / t.seconds());
  }
  return best;
}

// The bytes a decode token reads in each phase of the decode step, given all it reads (token_bytes:
// Transformer::decode_bytes at its position), split as DecodeProfile splits the step: the attention's
// phase reads wq, wk, wv and the KV cache — what the other phases' matrices leave; the waits nothing.
std::array<double, DecodeProfile::kPhases> decode_phase_bytes(const ModelWeights& w, double token_bytes) {
  using P = DecodeProfile;
  std::array<double, P::kPhases> b{};
  auto add = [](double& to, const Tensor& t) { to += t.empty() ? 0.0 : double(t.nbytes()); };
  for (const LayerWeights& lw : w.layers) {
    add(b[P::Projection], lw.wo);
    add(b[P::FfnIn], lw.w1), add(b[P::FfnIn], lw.w3);  // (no w3 without a gated feed-forward)
    add(b[P::FfnOut], lw.w2);
  }
  b[P::Classifier] = double(dtype_bytes(w.classifier.dtype, size_t(w.config.vocab_size) * size_t(w.config.dim)));
  b[P::Attention] = token_bytes - b[P::Projection] - b[P::FfnIn] - b[P::FfnOut] - b[P::Classifier];
  return b;
}

// The weights to measure: random ones of opt.config in opt.dtype (f32 unless set), or opt.model
// loaded as `orion generate` loads it (memory-mapped where its layout allows; converted only when
// opt.dtype asks).
ModelWeights bench_weights(const SpeedOptions& opt, const std::function<void(const std::string&)>& say) {
  if (!opt.model.empty()) {
    say(fmt::format("loading {}", opt.model));
    LoadOptions load;
    load.dtype = opt.dtype;
    return load_model(opt.model, load);
  }
  const ModelConfig config = config_preset(opt.config);
  const DType dtype = opt.dtype.value_or(DType::F32);
  say(fmt::format("making random {} weights ({}, {:.1f}M parameters)", opt.config, dtype_name(dtype),
                  config.num_params() / 1e6));
  return random_weights(config, opt.seed, dtype);
}

}  // namespace

SpeedReport measure_generation_speed(const SpeedOptions& opt, void (*on_progress)(const char*)) {
  auto say = [&](const std::string& s) {
    if (on_progress) on_progress(s.c_str());
  };
  if (opt.prompt_tokens < 1 || opt.decode_tokens < 1 || opt.repeat < 1)
    throw_usage_error("prompt, decode and repeat counts must be ≥ 1", "--prompt-len");
  if (opt.streams < 1 || (opt.streams > 1 && opt.backend != "cpu"))
    throw_usage_error(fmt::format("--streams {}: batched decode is measured on the CPU backend, with 1 or more streams",
                                  opt.streams),
                      "--streams", "drop --streams or use --backend cpu");
  SpeedReport r;
  const ModelWeights w = bench_weights(opt, say);
  r.config_name = opt.model.empty() ? opt.config : opt.model;
  r.config = w.config;
  if (opt.prompt_tokens + opt.decode_tokens > r.config.seq_len)
    throw_usage_error(
        fmt::format("prompt + decode tokens exceed the context of {} ({})", r.config_name, r.config.seq_len),
        "--prompt-len", "use fewer tokens");
  r.dtype = dtype_name(w.matrix_dtype());
  r.isa = cpu::isa_name(cpu::active_isa());
  r.threads = cpu::num_threads();
  r.prompt_tokens = opt.prompt_tokens, r.decode_tokens = opt.decode_tokens;
  r.backend = opt.backend;
  r.prefill_gemm = cpu::prefill_gemm_name(cpu::prefill_gemm());
  if (opt.backend != "cpu") return measure_ane_generation_speed(opt, std::move(r), w, on_progress);

  Transformer tf(w, opt.prompt_tokens + opt.decode_tokens, opt.kv_cache);
  r.kv_cache = dtype_name(opt.kv_cache);
  std::mt19937 rng(uint32_t(opt.seed));
  std::vector<int> prompt(static_cast<size_t>(opt.prompt_tokens));
  for (int& t : prompt) t = int(rng() % uint32_t(r.config.vocab_size));

  // The bound is measured between the tokens: after every kPassEvery-th token of each decode run
  // all threads read exactly the bytes that token read — its weights and KV cache
  // (Transformer::decode_reads) — and do nothing else (cpu::time_read_pass): the fastest a token
  // could go on this machine at that moment. A shared machine's bandwidth moves from second to
  // second, and a bound taken apart from the run (before it, after it, on a buffer of its own) once
  // put a decode at 121% of it and the next run at 71%; paired this closely both see the same
  // machine. The pass also leaves the caches as a token does, so what a token finds cached (the KV
  // cache can stay in L3 while the weights stream past) a pass finds too. The run's read bandwidth
  // is its median pass's.
  constexpr int kPassEvery = 4;
  double best_read = 0;  // bytes/s of the best decode run's passes
  for (int rep = 0; rep < opt.repeat; rep++) {
    say(fmt::format("run {}/{}: prefill {} tokens, decode {} tokens", rep + 1, opt.repeat, opt.prompt_tokens,
                    opt.decode_tokens));
    Timer t;
    const float* lg = tf.forward(prompt.data(), opt.prompt_tokens, 0);
    r.prefill_tok_s = std::max(r.prefill_tok_s, opt.prompt_tokens / t.seconds());
    double decode_s = 0;
    std::vector<double> rates;  // bytes/s of each pass
    DecodeProfile profile;
    for (int i = 0; i < opt.decode_tokens; i++) {
      int next = int(std::max_element(lg, lg + r.config.vocab_size) - lg);
      const int pos = opt.prompt_tokens + i;
      t.reset();
      if (opt.phases) set_decode_profile(&profile);
      lg = tf.forward(&next, 1, pos);
      set_decode_profile(nullptr);
      decode_s += t.seconds();
      const bool last_chance = i == opt.decode_tokens - 1 && rates.empty();
      if (opt.measure_bandwidth && (i % kPassEvery == kPassEvery - 1 || last_chance)) {
        const std::vector<cpu::ByteRange> reads = tf.decode_reads(pos);
        rates.push_back(cpu::total_bytes(reads) / cpu::time_read_pass(reads));
      }
    }
    const double decode_tok_s = opt.decode_tokens / decode_s;
    if (decode_tok_s > r.decode_tok_s) {
      r.decode_tok_s = decode_tok_s;
      r.decode_phase_us.clear();
      for (const auto& thread : profile.seconds) {
        r.decode_phase_us.emplace_back();
        for (int p = 0; p < DecodeProfile::kPhases; p++)
          r.decode_phase_us.back()[size_t(p)] = 1e6 * thread[size_t(p)] / double(std::max<int64_t>(profile.tokens, 1));
      }
      if (!rates.empty()) {
        std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
        best_read = rates[rates.size() / 2];
      }
    }
  }
  r.streams = opt.streams;
  if (opt.streams > 1) r.batched_tok_s = measure_batched_decode(opt, w, rng, say);
  r.peak_rss_bytes = peak_resident_bytes();  // the runs', before the STREAM triad's arrays
  r.weight_bytes = double(w.matrix_bytes());
  r.bytes_per_token = tf.decode_bytes(opt.prompt_tokens + opt.decode_tokens / 2);
  if (!r.decode_phase_us.empty()) r.decode_phase_bytes = decode_phase_bytes(w, r.bytes_per_token);
  if (opt.measure_bandwidth) {
    r.read_gb_s = best_read / 1e9;
    r.bound_tok_s = best_read / r.bytes_per_token;
    r.bandwidth_efficiency = r.decode_tok_s / r.bound_tok_s;
    say("measuring memory bandwidth (STREAM triad, 3 × 256 MB)");
    r.stream_triad_gb_s = cpu::stream_triad_bandwidth(size_t(256) << 20, 5) / 1e9;
  }
  if (opt.measure_gemm) {
    // q8_0 weights: Orion's int8 kernels too, whose peak (VNNI) may pass the fp32 one — a bound set
    // by fp32 alone would not bound a q8_0 prefill.
    const bool q8 = w.matrix_dtype() == DType::Q8_0;
    say(q8 ? "measuring the GEMM peak (a prompt-shaped product: fp32 on each GEMM path, and q8_0)"
           : "measuring the fp32 GEMM peak (a prompt-shaped product, each GEMM path)");
    const cpu::GemmPeak peak = cpu::measure_gemm_peak(opt.prompt_tokens, r.config.dim, r.config.hidden_dim, 5, q8);
    r.gemm_orion_gflops = peak.orion_flops / 1e9, r.gemm_library_gflops = peak.library_flops / 1e9;
    r.gemm_q8_gflops = peak.q8_flops / 1e9;
    r.prefill_bound_tok_s = peak.best_flops / (2.0 * double(r.config.num_params()));
    r.prefill_efficiency = r.prefill_tok_s / r.prefill_bound_tok_s;
  }
  if (opt.streams > 1 && r.read_gb_s > 0) {
    // A step's bytes: the weights once, each stream's KV cache at the mean position.
    const int mid = opt.prompt_tokens + opt.decode_tokens / 2;
    const double kv = (r.bytes_per_token - tf.decode_bytes(0)) * (mid + 1) / mid, weights = r.bytes_per_token - kv;
    double step_s = (weights + opt.streams * kv) / (r.read_gb_s * 1e9);
    if (r.prefill_bound_tok_s > 0) step_s = std::max(step_s, opt.streams / r.prefill_bound_tok_s);
    r.batched_bound_tok_s = opt.streams / step_s;
    r.batched_efficiency = r.batched_tok_s / r.batched_bound_tok_s;
  }
  return r;
}

std::string SpeedReport::to_json() const {
  nlohmann::json j = {{"config", config_name},
                      {"params", config.num_params()},
                      {"dtype", dtype},
                      {"kv_cache", kv_cache},
                      {"isa", isa},
                      {"threads", threads},
                      {"prompt_tokens", prompt_tokens},
                      {"decode_tokens", decode_tokens},
                      {"prefill_tok_s", prefill_tok_s},
                      {"decode_tok_s", decode_tok_s},
                      {"weight_bytes", weight_bytes},
                      {"bytes_per_token", bytes_per_token},
                      {"read_gb_s", read_gb_s},
                      {"stream_triad_gb_s", stream_triad_gb_s},
                      {"bandwidth_bound_tok_s", bound_tok_s},
                      {"bandwidth_efficiency", bandwidth_efficiency},
                      {"prefill_gemm", prefill_gemm},
                      {"gemm_orion_gflops", gemm_orion_gflops},
                      {"gemm_library_gflops", gemm_library_gflops},
                      {"gemm_q8_gflops", gemm_q8_gflops},
                      {"prefill_bound_tok_s", prefill_bound_tok_s},
                      {"prefill_efficiency", prefill_efficiency},
                      {"streams", streams},
                      {"batched_decode_tok_s", batched_tok_s},
                      {"batched_bound_tok_s", batched_bound_tok_s},
                      {"batched_efficiency", batched_efficiency},
                      {"peak_rss_bytes", peak_rss_bytes},
                      {"backend", backend}};
  if (!decode_phase_us.empty()) {
    nlohmann::json phases;
    for (int p = 0; p < DecodeProfile::kPhases; p++) {
      std::vector<double> per_thread;
      for (const auto& t : decode_phase_us) per_thread.push_back(t[size_t(p)]);
      phases[DecodeProfile::name(DecodeProfile::Phase(p))] = per_thread;
    }
    j["decode_phase_us"] = phases;
    nlohmann::json bytes;
    for (int p = 0; p < DecodeProfile::kPhases; p++)
      bytes[DecodeProfile::name(DecodeProfile::Phase(p))] = decode_phase_bytes[size_t(p)];
    j["decode_phase_bytes"] = bytes;
  }
  if (backend != "cpu") {
    j["chip"] = ane.chip;
    j["programs"] = ane.programs;
    j["prefill_bucket"] = ane.prefill_bucket;
    j["attention_min_bucket"] = ane.attention_min_bucket;
    j["compile_s"] = ane.compile_s;
    j["first_prefill_tok_s"] = ane.first_prefill_tok_s;
    j["predicted_ane_prefill_tok_s"] = ane.predicted_prefill_tok_s;
    j["predicted_ane_decode_tok_s"] = ane.predicted_decode_tok_s;
    j["evaluations_per_decode_token"] = ane.evaluations_per_decode_token;
    j["cache"] = {{"hits", ane.cache_hits},
                  {"misses", ane.cache_misses},
                  {"evictions", ane.cache_evictions},
                  {"resident", ane.cache_resident}};
    j["compile_budget"] = {{"used", ane.compiles_used}, {"limit", ane.compile_budget}};
  }
  return j.dump();
}

std::string SpeedReport::to_text() const {
  if (backend != "cpu") {
    auto per_token_ms = [](double tok_s) { return tok_s > 0 ? 1e3 / tok_s : 0.0; };
    return fmt::format(
        "{} ({}), weights {}, backend {} ({}), {} host threads\n"
        "  programs: {} compiled and loaded in {:.2f} s; first prefill (compiling) {:.1f} tok/s\n"
        "  buckets:  prefill S={}, attention ≥ {} (C7)\n"
        "  prefill:  host {:8.1f} tok/s | predicted ANE {:8.1f} tok/s  ({} tokens)\n"
        "  decode:   host {:8.1f} tok/s | predicted ANE {:8.1f} tok/s = {:.2f} ms/token, {} evaluations/token  ({} tokens)\n"
        "  {}\n  {}\n  peak resident memory: {:.0f} MB\n",
        config_name, config.describe(), dtype, backend, ane.chip, threads, ane.programs, ane.compile_s,
        ane.first_prefill_tok_s, ane.prefill_bucket, ane.attention_min_bucket, prefill_tok_s, ane.predicted_prefill_tok_s,
        prompt_tokens, decode_tok_s, ane.predicted_decode_tok_s, per_token_ms(ane.predicted_decode_tok_s),
        ane.evaluations_per_decode_token, decode_tokens, ane.cache_line, ane.budget_line, peak_rss_bytes / 1e6);
  }
  std::string s = fmt::format(
      "{} ({}), weights {}, KV cache {}, {} threads, {}\n"
      "  prefill: {:8.1f} tok/s  ({} tokens)\n"
      "  decode:  {:8.1f} tok/s  ({} tokens, {:.1f} MB read per token)\n"
      "  peak resident memory: {:.0f} MB\n",
      config_name, config.describe(), dtype, kv_cache, threads, isa, prefill_tok_s, prompt_tokens, decode_tok_s, decode_tokens,
      bytes_per_token / 1e6, peak_rss_bytes / 1e6);
  if (read_gb_s > 0)
    s += fmt::format(
        "  memory:  {:.1f} GB/s reading a token's bytes between its tokens (STREAM triad {:.1f}) → bound {:.1f} tok/s; decode "
        "reaches {:.0f}% of it\n",
        read_gb_s, stream_triad_gb_s, bound_tok_s, 100 * bandwidth_efficiency);
  if (prefill_bound_tok_s > 0) {
    const std::string library = gemm_library_gflops > 0 ? fmt::format(", oneDNN {:.0f}", gemm_library_gflops) : "";
    const std::string q8 = gemm_q8_gflops > 0 ? fmt::format("; q8_0 GEMM {:.0f}", gemm_q8_gflops) : "";
    s += fmt::format(
        "  compute: fp32 GEMM {:.0f} GFLOP/s (Orion {:.0f}{}){} → bound {:.1f} tok/s; prefill ({}) reaches {:.0f}% of it\n",
        std::max(gemm_orion_gflops, gemm_library_gflops), gemm_orion_gflops, library, q8, prefill_bound_tok_s,
        prefill_gemm, 100 * prefill_efficiency);
  }
  if (!decode_phase_us.empty()) {
    // µs per token in each phase, thread by thread ("a / b"), and the share of the token's time.
    s += fmt::format("  phases:  µs per decode token (thread {}), of {:.0f} µs a token:",
                     decode_phase_us.size() == 1 ? "0" : fmt::format("0 … {}", decode_phase_us.size() - 1),
                     1e6 / decode_tok_s);
    for (int p = 0; p < DecodeProfile::kPhases; p++) {
      std::string per_thread;
      double sum = 0;
      for (const auto& t : decode_phase_us) {
        per_thread += fmt::format("{}{:.0f}", per_thread.empty() ? "" : " / ", t[size_t(p)]);
        sum += t[size_t(p)];
      }
      const double mean_us = sum / double(decode_phase_us.size()), share = 100 * mean_us * decode_tok_s / 1e6;
      // A phase that reads memory: its bytes over the threads' mean time in it, and that rate against
      // the read pass behind the bound (where a token's time goes slower than its bytes allow).
      std::string rate;
      if (const double bytes = decode_phase_bytes[size_t(p)]; bytes > 0 && mean_us > 0) {
        const double gb_s = bytes / (mean_us * 1e3);
        rate = read_gb_s > 0 ? fmt::format("; {:.1f} GB/s, {:.0f}% of the read pass", gb_s, 100 * gb_s / read_gb_s)
                             : fmt::format("; {:.1f} GB/s", gb_s);
      }
      s += fmt::format("{} {} {} ({:.0f}%{})", p ? "," : "", DecodeProfile::name(DecodeProfile::Phase(p)), per_thread,
                       share, rate);
    }
    s += "\n";
  }
  if (streams > 1) {
    s += fmt::format("  batched: {:8.1f} tok/s  ({} streams decoding together, {:.2f}× one stream", batched_tok_s, streams,
                     batched_tok_s / decode_tok_s);
    s += batched_bound_tok_s > 0
             ? fmt::format("; {:.0f}% of their bound {:.1f} tok/s)\n", 100 * batched_efficiency, batched_bound_tok_s)
             : ")\n";
  }
  return s;
}

}  // namespace orion
