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
  ThreadOptions threads;
  bool plain = false, sequential = false, no_progress = false;
};

// On --resume the checkpoint's numeric options win (bit-identical continuation); flags that would
// change them are reported instead of silently ignored.
void note_ignored_flags(CLI::App* cmd) {
  for (const char* flag : {"--config", "--init", "--data", "--tokenizer", "--vocab", "--batch", "--seq", "--accum", "--lr",
                           "--schedule", "--warmup", "--min-lr-ratio", "--weight-decay", "--beta1", "--beta2", "--clip",
                           "--seed", "--sequential", "--plain", "--max-bad-steps", "--sanitize-grads"})
    if (cmd->count(flag) > 0)
      std::fprintf(stderr, "train: note: %s is ignored with --resume (the checkpoint's value continues the run as started)\n", flag);
}

// Data parallel under mpirun: every rank runs this (tools/options.h: run_data_parallel).
void train_one_rank(TrainArgs& a, CLI::App* cmd, train::dist::Communicator& comm) {
  a.threads.apply();
  if (a.plain) a.o.plain();
  if (a.sequential) a.o.shuffle = false;
  a.o.progress = !a.no_progress;
  if (cmd->count("--resume") > 0 && a.o.resume.empty())  // bare --resume: the checkpoints folder in use
    a.o.resume = !a.o.ckpt_dir.empty() ? a.o.ckpt_dir : a.o.out.empty() ? std::string("orion-train") : a.o.out;
  if (!a.o.resume.empty()) {
    note_ignored_flags(cmd);
    if (cmd->count("--steps") == 0) a.o.steps = 0;  // 0: the checkpoint's total
  }
  if (!a.no_progress && comm.rank() == 0)
    std::fprintf(stderr, "train: %s, %d CPU threads%s\n",
                 a.o.backend == "cpu" ? "CPU backend" : ("blocks on " + a.o.backend + " (ANE programs)").c_str(), cpu::num_threads(),
                 comm.world() > 1 ? " per rank" : "");
  train::Trainer t(a.o, &comm);
  train::TrainResult r = t.run();
  if (!r.model.empty() && !a.no_progress && comm.rank() == 0)
    std::fprintf(stderr, "next: orion generate --model %s%s%s --prompt \"Once upon a time\"\n", r.model.c_str(),
                 r.tokenizer.empty() ? "" : " --tokenizer ", r.tokenizer.c_str());
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  train::TrainOptions& o = a->o;
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
  cmd->add_option("--config", o.config, "model: a preset (" + fmt::format("{}", fmt::join(config_preset_names(), ", ")) +
                                            ") or a JSON file of dimensions")->capture_default_str();
  cmd->add_option("--init", o.init, "fine-tune from this model file (any format) instead of a fresh init");
  cmd->add_option("--data", o.data, "builtin[:STORIES[:SEED]], a folder from `orion data prepare`, or a token file")->capture_default_str();
  cmd->add_option("--tokenizer", o.tokenizer, "tokenizer file (default with builtin data: train one into --out)");
  cmd->add_option("--vocab", o.vocab, "vocabulary of the trained tokenizer")->capture_default_str()->check(CLI::Range(260, 32000));
  cmd->add_option("--steps", o.steps, "total optimisation steps (a resumed run stops where a straight run would)")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  cmd->add_option("--batch,-b", o.batch, "sequences per micro-batch (B), per rank under mpirun")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--seq", o.seq, "tokens per sequence (T)")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--accum", o.accum, "micro-batches per step (gradient accumulation)")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--lr", o.lr, "peak learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--schedule", o.schedule, "cosine (decay to lr·min-lr-ratio) or constant")->capture_default_str()
      ->check(CLI::IsMember({"cosine", "constant"}));
  cmd->add_option("--warmup", o.warmup, "linear warmup steps (-1: 5% of --steps, at most 100)")->capture_default_str()->check(CLI::Range(-1, 1 << 30));
  cmd->add_option("--min-lr-ratio", o.min_lr_ratio, "final lr of the cosine, as a fraction of --lr")->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay (matrices only)")->capture_default_str()->check(CLI::Range(0.0f, 10.0f));
  cmd->add_option("--beta1", o.beta1, "AdamW β1")->capture_default_str()->check(CLI::Range(0.0f, 0.99999f));
  cmd->add_option("--beta2", o.beta2, "AdamW β2")->capture_default_str()->check(CLI::Range(0.0f, 0.99999f));
  cmd->add_option("--clip", o.clip, "global gradient-norm clipping (0: none)")->capture_default_str()->check(CLI::Range(0.0f, 1e6f));
  cmd->add_flag("--sequential", a->sequential, "read batches in order (llm.c) instead of shuffled windows");
  cmd->add_flag("--plain", a->plain, "llm.c's plain settings: constant lr, no warmup, no clipping, no weight decay, sequential");
  cmd->add_option("--seed", o.seed, "seed of the init, the data order and the samples")->capture_default_str();
  cmd->add_option("--eval-every", o.eval_every, "validation loss every N steps (0: only at the end)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--eval-batches", o.eval_batches, "validation batches per evaluation")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--log-every", o.log_every, "progress line every N steps (0: about 40 lines)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--checkpoint-every", o.checkpoint_every, "checkpoint every N steps (0: only at the end)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--keep", o.keep, "checkpoints kept (0: all)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--out,-o", o.out, "run folder: tokenizer, data, checkpoints/, metrics.jsonl, model (default orion-train)");
  cmd->add_option("--ckpt-dir", o.ckpt_dir, "checkpoints folder (default OUT/checkpoints); --resume DIR takes its newest valid one");
  cmd->add_option("--metrics", o.metrics, "metrics log, one row per step: FILE.csv or FILE.jsonl (default OUT/metrics.jsonl)");
  cmd->add_option("--resume", o.resume, "continue from a run folder, its checkpoints/, a --ckpt-dir or a ckpt_*.ckpt file (bare: --ckpt-dir, else --out)")->expected(0, 1);
  cmd->add_option("--stop-after", o.stop_after, "stop this process after N steps (checkpointed; continue with --resume)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--export-format", o.export_format, "format of the final model: llama2c, llama2c-v1, safetensors, llmc or none "
                                                      "(default llama2c for Llama, llmc for GPT-2)");
  cmd->add_option("--sample", o.sample_tokens, "tokens of the greedy sample printed at the end, and (≤ 32) at every evaluation (0: none)")->capture_default_str()->check(CLI::Range(0, 4096));
  cmd->add_option("--max-bad-steps", o.max_bad_steps, "stop after this many consecutive steps with a NaN/Inf loss or gradient")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_flag("--sanitize-grads", o.sanitize_grads, "repair NaN/Inf gradients (NaN → 0, ±Inf → ±65504, as the fp16 path) instead of skipping");
  cmd->add_option("--backend", o.backend, "where the transformer blocks run: cpu, or anesim / ane (ANE programs: forward and input "
                                         "gradients on the ANE, weight gradients and AdamW on the CPU)")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "anesim", "ane"}));
  add_ane_train_options(cmd, o.ane);
  cmd->add_option("--verify-every", o.ane.verify_every, "ANE path: verify each program's weight update by a probe on the first "
                                                         "and every N-th update (0: the first only)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_flag("--reload-takes-effect", o.ane.reload_takes_effect, "anesim: model hardware on which a delta reload changes the weights "
                                                                     "(the default models M3–M5, where it does not)");
  cmd->add_flag("--no-progress", a->no_progress, "no progress lines on stderr");
  a->threads.add(cmd);
  cmd->callback([a, cmd] { run_data_parallel(cmd, a->threads, [&](train::dist::Communicator& c) { train_one_rank(*a, cmd, c); }); });
}

}  // namespace orion::tools
