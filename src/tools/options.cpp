#include "tools/options.h"

#include "base/error.h"
#include "runtime/cpu/kernels.h"

namespace orion::tools {

void ThreadOptions::add(CLI::App* cmd) {
  cmd->add_option("--threads,-t", threads, "worker threads (0 = all cores)")->capture_default_str()->check(CLI::Range(0, 1024));
}

void ThreadOptions::apply() const { cpu::set_num_threads(threads); }

void DTypeOption::add(CLI::App* cmd, const std::string& help) {
  cmd->add_option("--dtype", name, help)->check(CLI::IsMember({"f32", "f16", "bf16"}));
}

std::optional<DType> DTypeOption::get() const {
  if (name.empty()) return std::nullopt;
  auto d = parse_dtype(name);
  if (!d) throw_usage_error(fmt::format("unknown dtype '{}'", name), "--dtype", "use f32, f16 or bf16");
  return d;
}

void add_sampler_options(CLI::App* cmd, SamplerOptions& s) {
  cmd->add_option("--temperature", s.temperature, "sampling temperature; 0 = greedy (argmax)")
      ->capture_default_str()->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-p", s.top_p, "nucleus sampling: keep the most likely tokens up to this total probability (1 = off)")
      ->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--top-k", s.top_k, "keep only the k most likely tokens (0 = off)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", s.seed, "random seed: the same seed gives the same text")->capture_default_str();
}

}  // namespace orion::tools
