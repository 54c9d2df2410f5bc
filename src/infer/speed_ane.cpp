// `orion bench generate --backend anesim|ane`: prefill and decode through compiled programs
// (infer/ane_model.h) on random weights or a model file. Three clocks are read: the host's (what
// this machine took — on anesim that is the software ANE computing in fp16), the program cache's
// compile time, and the driver's predicted_ane_ms (anesim's timing model of the chip; ANE work only).
#include <algorithm>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "base/memory_usage.h"
#include "base/timer.h"
#include "infer/ane_model.h"
#include "infer/speed.h"

namespace orion {
namespace {

// Tokens per second from a count and a time in milliseconds (0 when no time was spent).
double rate(int tokens, double ms) { return ms > 0 ? tokens / (ms / 1e3) : 0; }

}  // namespace

SpeedReport measure_ane_generation_speed(const SpeedOptions& opt, SpeedReport r, const ModelWeights& w,
                                         void (*on_progress)(const char*)) {
  auto say = [&](const std::string& s) {
    if (on_progress) on_progress(s.c_str());
  };
  std::mt19937 rng(uint32_t(opt.seed));
  std::vector<int> prompt(static_cast<size_t>(opt.prompt_tokens));
  for (int& t : prompt) t = int(rng() % uint32_t(r.config.vocab_size));

  AneRuntime rt(opt.backend, opt.chip);
  const std::string name = opt.model.empty() ? opt.config : std::filesystem::path(opt.model).stem().string();
  AneModel model(w, rt.cache, {name, opt.prompt_tokens + opt.decode_tokens});
  AneSpeed& a = r.ane;
  a.chip = rt.driver->chip().name;
  a.attention_min_bucket = model.attention_min_bucket();
  a.prefill_bucket = opt.prompt_tokens > 1 ? model.prefill_bucket(opt.prompt_tokens) : 0;

  // The first prefill compiles its programs (the original Orion: 12 tok/s on first call, 165 once
  // cached); prepare() then compiles the decode programs, so the timed runs below compile nothing.
  say(fmt::format("compiling on {} ({}): first prefill of {} tokens", opt.backend, a.chip, opt.prompt_tokens));
  Timer t;
  model.forward(prompt.data(), opt.prompt_tokens, 0);
  a.first_prefill_tok_s = opt.prompt_tokens / t.seconds();
  a.programs = model.prepare(opt.prompt_tokens);

  const runtime::DriverCounters& n = rt.driver->counters();
  for (int rep = 0; rep < opt.repeat; rep++) {
    say(fmt::format("run {}/{}: prefill {} tokens, decode {} tokens", rep + 1, opt.repeat, opt.prompt_tokens,
                    opt.decode_tokens));
    double ane0 = n.predicted_ane_ms;
    t.reset();
    const float* lg = model.forward(prompt.data(), opt.prompt_tokens, 0);
    r.prefill_tok_s = std::max(r.prefill_tok_s, opt.prompt_tokens / t.seconds());
    a.predicted_prefill_tok_s = std::max(a.predicted_prefill_tok_s, rate(opt.prompt_tokens, n.predicted_ane_ms - ane0));

    ane0 = n.predicted_ane_ms;
    int64_t evals0 = n.evaluations;
    t.reset();
    for (int i = 0; i < opt.decode_tokens; i++) {
      int next = int(std::max_element(lg, lg + r.config.vocab_size) - lg);  // greedy, on the CPU
      lg = model.forward(&next, 1, opt.prompt_tokens + i);
    }
    r.decode_tok_s = std::max(r.decode_tok_s, opt.decode_tokens / t.seconds());
    a.predicted_decode_tok_s = std::max(a.predicted_decode_tok_s, rate(opt.decode_tokens, n.predicted_ane_ms - ane0));
    a.evaluations_per_decode_token = (n.evaluations - evals0) / opt.decode_tokens;
  }

  const runtime::CacheStats cs = rt.cache.stats();
  a.compile_s = cs.compile_s;
  a.cache_hits = cs.hits, a.cache_misses = cs.misses, a.cache_evictions = cs.evictions, a.cache_resident = cs.resident;
  a.compiles_used = rt.budget.used(), a.compile_budget = rt.budget.limit();
  a.cache_line = cs.str(), a.budget_line = rt.budget.str();
  r.weight_bytes = double(w.matrix_bytes());
  r.peak_rss_bytes = peak_resident_bytes();
  return r;
}

}  // namespace orion
