// orion bench: speed measurements on random weights of named configs (no files needed), or on a
// model file as `orion generate` loads it.
#include <cstdio>

#include "base/error.h"
#include "infer/speed.h"
#include "model/config.h"
#include "runtime/cpu/kernels.h"
#include "tools/command.h"
#include "tools/options.h"

namespace orion::tools {
namespace {

struct BenchGenerateArgs {
  SpeedOptions speed;
  ThreadOptions threads;
  DTypeOption dtype;
  KvCacheOption kv_cache;
  bool json = false, no_bandwidth = false, no_gemm = false, phases = false;
  std::string gemm;  // empty: the default path (cpu::prefill_gemm)
};

void run_bench_generate(BenchGenerateArgs& a) {
  a.threads.apply();
  a.speed.dtype = a.dtype.get();
  a.speed.kv_cache = a.kv_cache.get();
  if (a.speed.backend != "cpu" && a.speed.kv_cache != DType::F32)
    throw_usage_error("--kv-cache f16 is for the CPU backend", "--kv-cache", "drop --kv-cache or use --backend cpu");
  a.speed.measure_bandwidth = !a.no_bandwidth && a.speed.backend == "cpu";
  a.speed.measure_gemm = !a.no_gemm && a.speed.backend == "cpu";
  if (a.phases && a.speed.backend != "cpu")
    throw_usage_error("--phases times the CPU decode step", "--phases", "drop --phases or use --backend cpu");
  a.speed.phases = a.phases;
  if (!a.gemm.empty() &&
      !cpu::set_prefill_gemm(a.gemm == "onednn" ? cpu::PrefillGemm::OneDnn : cpu::PrefillGemm::Orion))
    throw_usage_error("this build has no oneDNN", "--gemm",
                      "install libdnnl-dev (scripts/setup.sh) and rebuild, or use --gemm orion");
  auto progress = a.json ? nullptr : +[](const char* s) { std::fprintf(stderr, "… %s\n", s); };
  SpeedReport r = measure_generation_speed(a.speed, progress);
  std::string out = a.json ? r.to_json() + "\n" : r.to_text();
  std::fputs(out.c_str(), stdout);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "measure speed (random weights of named configs, no files needed; or generate on a model file)");
  bench->require_subcommand(1);

  auto a = std::make_shared<BenchGenerateArgs>();
  CLI::App* gen = bench->add_subcommand(
      "generate",
      "prefill and decode tok/s: the CPU path against the memory-bandwidth bound, or the ANE path (--backend) "
      "with compile time, cache statistics and anesim's predicted ANE tok/s");
  CLI::Option* config = gen->add_option("--config", a->speed.config, "model config (random weights)")
                             ->capture_default_str()
                             ->check(CLI::IsMember(config_preset_names()));
  gen->add_option("-m,--model", a->speed.model,
                  "instead of --config: a model file or folder (llama2.c .bin, safetensors, llm.c .bin, GGUF), "
                  "memory-mapped as `orion generate` loads it")
      ->excludes(config);
  a->dtype.add(gen, "weight precision (default: f32 for --config, as stored for --model)");
  a->kv_cache.add(gen);
  gen->add_option("--prompt-len", a->speed.prompt_tokens, "prompt tokens (prefill)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  gen->add_option("--decode-len", a->speed.decode_tokens, "decoded tokens")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  gen->add_option("--repeat", a->speed.repeat, "runs; the best is reported")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  gen->add_option("--streams", a->speed.streams,
                  "also decode this many sequences together, as `orion serve --parallel N` does (CPU), against their bound")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  gen->add_option("--backend", a->speed.backend,
                  "cpu, or transformer blocks as ANE programs on anesim (any machine) or ane (macOS)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "anesim", "ane"}));
  gen->add_option("--chip", a->speed.chip, "ANE generation anesim models (m1 … m5)")->capture_default_str();
  gen->add_flag("--json", a->json, "print the figures as one JSON object");
  gen->add_flag("--no-bandwidth", a->no_bandwidth, "skip the memory-bandwidth measurements (the read probe after each decode run, the STREAM triad)");
  gen->add_flag("--phases", a->phases,
                "also time each phase of the decode step per thread (attention, wo, ffn in/out, classifier; its "
                "bytes over its time against the read pass) and the wait at the barrier after each: where a "
                "token's time goes against its bound (CPU)");
  gen->add_flag("--no-gemm-peak", a->no_gemm, "skip the GEMM-peak measurement behind the prefill bound");
  gen->add_option("--gemm", a->gemm,
                  "prompt GEMMs through Orion's kernels (default; bit-identical to decode) or oneDNN (when built in)")
      ->check(CLI::IsMember({"orion", "onednn"}));
  a->threads.add(gen);
  gen->callback([a] { run_bench_generate(*a); });
}

}  // namespace orion::tools
