// Option groups shared by several commands (model loading, threads, sampling), so every command
// spells and checks them the same way.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "base/dtype.h"
#include "infer/sampler.h"
#include "tools/train_progress.h"

namespace orion::train {
struct AneTrainOptions;
struct TrainOptions;
}  // namespace orion::train
namespace orion::train::dist {
class Communicator;
}

namespace orion::tools {

struct ThreadOptions {
  int threads = 0;  // 0: all cores
  void add(CLI::App* cmd);
  void apply() const;  // sets the kernels' thread count
};

struct DTypeOption {
  std::string name;  // empty: keep the stored precision
  void add(CLI::App* cmd, const std::string& help);
  std::optional<DType> get() const;  // Usage error naming --dtype for an unknown name
};

// --kv-cache f32|f16: the elements of the CPU path's KV cache (model/kv_cache.h).
struct KvCacheOption {
  std::string name = "f32";
  void add(CLI::App* cmd);
  DType get() const;
};

// Runs a training command on every rank of a data-parallel run (train/dist/): one Communicator per
// process (MPI under mpirun, else one process). With several ranks and no --threads, this host's
// cores are shared between its ranks; an error only one rank saw ends every rank (MPI_Abort)
// after naming the rank. Without MPI, launching several processes is refused by
// make_communicator() — on rank 0 only, the others leave quietly.
void run_data_parallel(CLI::App* cmd, ThreadOptions& threads, const std::function<void(train::dist::Communicator&)>& body);

void add_sampler_options(CLI::App* cmd, SamplerOptions& s);

// The flags of a training run that `orion train` and `orion lora train` share, spelled and checked
// the same way for both (train/loop/train_options.h): data, batches (--accum), optimiser and
// schedule, guards, evaluation, checkpoints (--ckpt-dir, --keep, --resume, --stop-after), --metrics,
// the backend with its ANE options, --no-progress and --threads. Each command adds its own flags.
struct TrainingFlags {
  ThreadOptions threads;
  bool sequential = false, no_progress = false;
  // The help of the flags whose meaning differs in detail between the commands.
  struct Help {
    std::string data, out, resume;
  };
  void add(CLI::App* cmd, train::TrainOptions& o, const Help& help);
  // After parsing, on every rank: --threads, --sequential, and progress shown in `style` unless
  // --no-progress.
  void apply(train::TrainOptions& o, ProgressStyle style) const;
};

// The ANE path's training options both `orion train` and `orion bench train` take: --weight-update,
// --chip, --overlap-dw.
void add_ane_train_options(CLI::App* cmd, train::AneTrainOptions& o);

// Parses `flags` as the flags of app's subcommand `path` ("train", "lora train"); a parse error
// becomes the Usage error whose line the CLI prints for it.
void parse_subcommand_flags(CLI::App& app, const std::string& path, const std::vector<std::string>& flags);

// The tokenizer that sits beside a model file (llama2.c and Hugging Face layouts); Usage error
// naming --tokenizer when there is none. tokenizer_beside: the same lookup, nullopt when there is none.
std::string find_tokenizer_beside(const std::string& model_path);
std::optional<std::string> tokenizer_beside(const std::string& model_path);

// On --resume the checkpoint's numeric options win (a bit-identical continuation): each flag given
// that would have changed them is reported on stderr as ignored, prefixed by `who` ("train").
void note_flags_ignored_on_resume(CLI::App* cmd, const char* who);

}  // namespace orion::tools
