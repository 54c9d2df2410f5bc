// orion train: train a model on the CPU (train/loop/trainer.h does the work).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "base/error.h"
#include "runtime/cpu/kernels.h"
#include "tools/command.h"
#include "tools/options.h"
#include "train/dist/communicator.h"
#include "train/loop/trainer.h"

namespace orion::tools {
namespace {

struct TrainArgs {
  train::TrainOptions o;
  TrainingFlags flags;  // shared with orion lora train (options.h)
  bool plain = false;
};

// After parsing, on every rank: threads, progress, --plain, and what --resume continues.
void resolve_train_args(TrainArgs& a, CLI::App* cmd) {
  a.flags.apply(a.o, ProgressStyle::Train);
  if (a.plain) a.o.plain();
  if (cmd->count("--resume") > 0 && a.o.resume.empty())  // bare --resume: the checkpoints folder in use
    a.o.resume = !a.o.ckpt_dir.empty() ? a.o.ckpt_dir : a.o.out.empty() ? std::string("orion-train") : a.o.out;
  if (!a.o.resume.empty()) {
    note_flags_ignored_on_resume(cmd, "train");
    if (cmd->count("--steps") == 0) a.o.steps = 0;  // 0: the checkpoint's total
  }
}

// Data parallel under mpirun: every rank runs this (tools/options.h: run_data_parallel).
void train_one_rank(TrainArgs& a, CLI::App* cmd, train::dist::Communicator& comm) {
  resolve_train_args(a, cmd);
  if (!a.flags.no_progress && comm.rank() == 0)
    std::fprintf(stderr, "train: %s, %d CPU threads%s\n",
                 a.o.backend == "cpu" ? "CPU backend" : ("blocks on " + a.o.backend + " (ANE programs)").c_str(),
                 cpu::num_threads(), comm.world() > 1 ? " per rank" : "");
  train::Trainer t(a.o, &comm);
  train::TrainResult r = t.run();
  if (!r.model.empty() && !a.flags.no_progress && comm.rank() == 0)
    std::fprintf(stderr, "next: orion generate --model %s%s%s --prompt \"Once upon a time\"\n", r.model.c_str(),
                 r.tokenizer.empty() ? "" : " --tokenizer ", r.tokenizer.c_str());
}

}  // namespace

namespace {

// The subcommand `train` of app with every flag of `orion train`, parsed into a.
CLI::App* add_train_flags(CLI::App& app, TrainArgs& a) {
  train::TrainOptions& o = a.o;
  o.out.clear();  // "": orion-train, or the resumed run's folder
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model on the CPU: AdamW, warmup + cosine learning rate, gradient accumulation, validation loss,\n"
      "checkpoints every --checkpoint-every steps (atomic; the last --keep kept), --resume continuing bit-identically,\n"
      "and the model exported to --out at the end. Steps with a NaN/Inf loss or gradient are skipped and counted.\n"
      "With the default --data builtin a BPE tokenizer of --vocab tokens is trained on the built-in stories first.\n"
      "Examples:\n"
      "  orion train --steps 300 --out run1                       (stories260k on the built-in stories)\n"
      "  orion train --resume run1 --steps 600                    (continue to step 600)\n"
      "  orion train --config my.json --data prepared/ --tokenizer tok.bin --out run2\n"
      "  orion train --init model.bin --data prepared/ --lr 1e-4 --steps 100 --out finetuned\n"
      "  mpirun -np 2 orion train --batch 4 --threads 1 --out run3   (data parallel: 2 ranks × 4 rows; docs/distributed.md)");
  cmd->add_option("--config", o.config,
                  "model: a preset (" + fmt::format("{}", fmt::join(config_preset_names(), ", ")) +
                      ") or a JSON file of dimensions")
      ->capture_default_str();
  cmd->add_option("--init", o.init, "fine-tune from this model file (any format) instead of a fresh init");
  cmd->add_option("--vocab", o.vocab, "vocabulary of the trained tokenizer")
      ->capture_default_str()
      ->check(CLI::Range(260, 32000));
  cmd->add_flag("--plain", a.plain,
                "llm.c's plain settings: constant lr, no warmup, no clipping, no weight decay, sequential");
  cmd->add_option("--export-format", o.export_format,
                  "format of the final model: llama2c, llama2c-v1, safetensors, llmc or none "
                  "(default llama2c for Llama, llmc for GPT-2)");
  cmd->add_option("--sample", o.sample_tokens,
                  "tokens of the greedy sample printed at the end, and (≤ 32) at every evaluation (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  a.flags.add(
      cmd, o,
      {.data = "builtin[:STORIES[:SEED]], a folder from `orion data prepare`, or a token file",
       .out = "run folder: tokenizer, data, checkpoints/, metrics.jsonl, model (default orion-train)",
       .resume =
           "continue from a run folder, its checkpoints/, a --ckpt-dir or a ckpt_*.ckpt file (bare: --ckpt-dir, else --out)"});
  return cmd;
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = add_train_flags(app, *a);
  cmd->callback([a, cmd] {
    run_data_parallel(cmd, a->flags.threads, [&](train::dist::Communicator& c) { train_one_rank(*a, cmd, c); });
  });
}

train::TrainOptions parse_train_flags(const std::vector<std::string>& flags) {
  CLI::App app;
  TrainArgs a;
  CLI::App* cmd = add_train_flags(app, a);
  parse_subcommand_flags(app, "train", flags);
  resolve_train_args(a, cmd);
  return a.o;
}

}  // namespace orion::tools
