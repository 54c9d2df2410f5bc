#include "tools/options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "runtime/cpu/kernels.h"
#include "train/ane/ane_blocks.h"
#include "train/dist/communicator.h"

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

void add_ane_train_options(CLI::App* cmd, train::AneTrainOptions& o) {
  cmd->add_option("--weight-update", "ANE path: how programs get new weights after each step — auto (probe, then the fastest "
                                     "that verifies), delta-reload, weights-as-inputs or recompile")
      ->default_str("auto")->check(CLI::IsMember({"auto", "delta-reload", "weights-as-inputs", "recompile"}))
      ->each([&o](const std::string& s) { o.weight_update = train::parse_update_strategy(s); });
  cmd->add_option("--chip", o.chip, "ANE path: chip profile (m1 … m5)")->capture_default_str();
  cmd->add_option("--overlap-dw", "ANE path: each layer's weight gradients on a worker thread while the next layer's "
                                  "programs run — auto (on for the ane driver, off on anesim, which shares the cores), on, off")
      ->default_str("auto")->check(CLI::IsMember({"auto", "on", "off"}))
      ->each([&o](const std::string& s) { o.overlap_dw = train::parse_overlap(s); });
}

void add_sampler_options(CLI::App* cmd, SamplerOptions& s) {
  cmd->add_option("--temperature", s.temperature, "sampling temperature; 0 = greedy (argmax)")
      ->capture_default_str()->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-p", s.top_p, "nucleus sampling: keep the most likely tokens up to this total probability (1 = off)")
      ->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--top-k", s.top_k, "keep only the k most likely tokens (0 = off)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", s.seed, "random seed: the same seed gives the same text")->capture_default_str();
}

std::string find_tokenizer_beside(const std::string& model_path) {
  namespace fs = std::filesystem;
  fs::path dir = fs::is_directory(model_path) ? fs::path(model_path) : fs::path(model_path).parent_path();
  if (dir.empty()) dir = ".";
  for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer.bin", "vocab.json", "encoder.json"})
    if (fs::exists(dir / name)) return (dir / name).string();
  throw_usage_error(fmt::format("no tokenizer given and none found beside {}", model_path), "--tokenizer",
                    "pass --tokenizer PATH (tokenizer.bin, tokenizer.json, vocab.json, encoder.json or a .model)");
}

void run_data_parallel(CLI::App* cmd, ThreadOptions& threads, const std::function<void(train::dist::Communicator&)>& body) {
  std::unique_ptr<train::dist::Communicator> comm;
  try {
    comm = train::dist::make_communicator();
  } catch (const Error& e) {
    if (train::dist::launcher_rank() != 0) std::exit(exit_code(e.kind()));
    throw;
  }
  if (comm->world() == 1) return body(*comm);
  if (cmd->count("--threads") == 0)  // share this host's cores between its ranks
    threads.threads = std::max(1, int(std::thread::hardware_concurrency()) / std::max(1, train::dist::launcher_local_size()));
  try {
    body(*comm);
  } catch (const Error& e) {
    std::fprintf(stderr, "orion: error on rank %d of %d: %s\n", comm->rank(), comm->world(), e.what());
    comm->abort(exit_code(e.kind()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "orion: error on rank %d of %d: %s\n", comm->rank(), comm->world(), e.what());
    comm->abort(exit_code(ErrorKind::Runtime));
  }
}

}  // namespace orion::tools
