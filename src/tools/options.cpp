#include "tools/options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "model/tokenizer/gguf_tokenizer.h"
#include "runtime/cpu/kernels.h"
#include "train/ane/ane_blocks.h"
#include "train/dist/communicator.h"
#include "train/loop/train_options.h"

namespace orion::tools {

void ThreadOptions::add(CLI::App* cmd) {
  cmd->add_option("--threads,-t", threads, "worker threads (0 = all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
}

void ThreadOptions::apply() const { cpu::set_num_threads(threads); }

void DTypeOption::add(CLI::App* cmd, const std::string& help) {
  cmd->add_option("--dtype", name, help)->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
}

std::optional<DType> DTypeOption::get() const {
  if (name.empty()) return std::nullopt;
  auto d = parse_dtype(name);
  if (!d) throw_usage_error(fmt::format("unknown dtype '{}'", name), "--dtype", "use f32, f16, bf16 or q8_0");
  return d;
}

void KvCacheOption::add(CLI::App* cmd) {
  cmd->add_option("--kv-cache", name,
                  "KV cache elements on the CPU: f32 (the reference) or f16 (half the memory and of the bytes a "
                  "decode step reads from the cache; each key and value rounded to f16 once)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16"}));
}

DType KvCacheOption::get() const { return name == "f16" ? DType::F16 : DType::F32; }

void add_ane_train_options(CLI::App* cmd, train::AneTrainOptions& o) {
  cmd->add_option("--weight-update",
                  "ANE path: how programs get new weights after each step — auto (probe, then the fastest "
                  "that verifies), delta-reload, weights-as-inputs or recompile")
      ->default_str("auto")
      ->check(CLI::IsMember({"auto", "delta-reload", "weights-as-inputs", "recompile"}))
      ->each([&o](const std::string& s) { o.weight_update = train::parse_update_strategy(s); });
  cmd->add_option("--chip", o.chip, "ANE path: chip profile (m1 … m5)")->capture_default_str();
  cmd->add_option("--overlap-dw",
                  "ANE path: each layer's weight gradients on a worker thread while the next layer's "
                  "programs run — auto (on for the ane driver, off on anesim, which shares the cores), on, off")
      ->default_str("auto")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->each([&o](const std::string& s) { o.overlap_dw = train::parse_overlap(s); });
}

void add_sampler_options(CLI::App* cmd, SamplerOptions& s) {
  cmd->add_option("--temperature", s.temperature, "sampling temperature; 0 = greedy (argmax)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-p", s.top_p, "nucleus sampling: keep the most likely tokens up to this total probability (1 = off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--top-k", s.top_k, "keep only the k most likely tokens (0 = off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", s.seed, "random seed: the same seed gives the same text")->capture_default_str();
}

void TrainingFlags::add(CLI::App* cmd, train::TrainOptions& o, const Help& help) {
  cmd->add_option("--data", o.data, help.data)->capture_default_str();
  cmd->add_option("--tokenizer", o.tokenizer,
                  "tokenizer file (default: trained into --out for builtin data; lora: the one beside the model)");
  cmd->add_option("--steps", o.steps, "total optimisation steps (a resumed run stops where a straight run would)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  cmd->add_option("--batch,-b", o.batch, "sequences per micro-batch (B), per rank under mpirun")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--seq", o.seq, "tokens per sequence (T)")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--accum", o.accum, "micro-batches per step (gradient accumulation)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--lr", o.lr, "peak learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--schedule", o.schedule, "cosine (decay to lr·min-lr-ratio) or constant")
      ->capture_default_str()
      ->check(CLI::IsMember({"cosine", "constant"}));
  cmd->add_option("--warmup", o.warmup, "linear warmup steps (-1: 5% of --steps, at most 100)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 30));
  cmd->add_option("--min-lr-ratio", o.min_lr_ratio, "final lr of the cosine, as a fraction of --lr")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay (matrices only)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 10.0f));
  cmd->add_option("--beta1", o.beta1, "AdamW β1")->capture_default_str()->check(CLI::Range(0.0f, 0.99999f));
  cmd->add_option("--beta2", o.beta2, "AdamW β2")->capture_default_str()->check(CLI::Range(0.0f, 0.99999f));
  cmd->add_option("--clip", o.clip, "global gradient-norm clipping (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1e6f));
  cmd->add_flag("--sequential", sequential, "read batches in order (llm.c) instead of shuffled windows");
  cmd->add_option("--seed", o.seed, "seed of the initialisation, the data order and the samples")->capture_default_str();
  cmd->add_option("--eval-every", o.eval_every, "validation loss every N steps (0: only at the end)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--eval-batches", o.eval_batches, "validation batches per evaluation")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--log-every", o.log_every, "progress line every N steps (0: a few dozen lines a run)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--checkpoint-every", o.checkpoint_every, "checkpoint every N steps (0: only at the end)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--keep", o.keep, "checkpoints kept (0: all)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--out,-o", o.out, help.out);
  cmd->add_option("--ckpt-dir", o.ckpt_dir,
                  "checkpoints folder (default OUT/checkpoints); --resume DIR takes its newest valid one");
  cmd->add_option("--metrics", o.metrics,
                  "metrics log, one row per step: FILE.csv or FILE.jsonl (default OUT/metrics.jsonl)");
  cmd->add_option("--resume", o.resume, help.resume)->expected(0, 1);
  cmd->add_option("--stop-after", o.stop_after, "stop this process after N steps (checkpointed; continue with --resume)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-bad-steps", o.max_bad_steps,
                  "stop after this many consecutive steps with a NaN/Inf loss or gradient")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("--sanitize-grads", o.sanitize_grads,
                "repair NaN/Inf gradients (NaN → 0, ±Inf → ±65504, as the fp16 path) instead of skipping");
  cmd->add_option("--backend", o.backend,
                  "where the transformer blocks run: cpu, or anesim / ane (ANE programs: forward and input "
                  "gradients on the ANE, weight gradients and AdamW on the CPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "anesim", "ane"}));
  cmd->add_option("--precision", o.precision,
                  "cpu: the matrices of the training products: fp32, bf16 (AVX512-BF16 where the CPU has it) or fp16 "
                  "(dynamic loss scaling); weights, gradients and AdamW stay fp32")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--loss-scale", o.loss_scale,
                  "scale the loss's gradient: dynamic (skip a step with Inf/NaN gradients and halve the scale, double "
                  "it after --loss-scale-window clean steps), a fixed number, or none; auto: dynamic for "
                  "--precision fp16, else none")
      ->capture_default_str();
  cmd->add_option("--loss-scale-window", o.loss_scale_window, "dynamic loss scale: clean steps before it doubles")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000000));
  cmd->add_option("--checkpoint-activations", o.checkpoint_activations,
                  "gradient checkpointing: none, blocks (keep only each block's input; recompute the block in the "
                  "backward: less memory, one more forward) or every-N (recompute one block in N)")
      ->capture_default_str();
  add_ane_train_options(cmd, o.ane);
  cmd->add_option("--verify-every", o.ane.verify_every,
                  "ANE path: verify each program's weight update by a probe on the first "
                  "and every N-th update (0: the first only)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--reload-takes-effect", o.ane.reload_takes_effect,
                "anesim: model hardware on which a delta reload changes the weights "
                "(the default models M3–M5, where it does not)");
  cmd->add_flag("--no-progress", no_progress, "no progress lines on stderr");
  threads.add(cmd);
}

void TrainingFlags::apply(train::TrainOptions& o, ProgressStyle style) const {
  threads.apply();
  if (sequential) o.shuffle = false;
  o.progress = !no_progress;
  if (o.progress) o.on_progress = progress_printer(style);
}

void parse_subcommand_flags(CLI::App& app, const std::string& path, const std::vector<std::string>& flags) {
  // CLI11 takes the arguments last first: the flags reversed, then the words of `path` reversed.
  std::vector<std::string> args(flags.rbegin(), flags.rend()), words;
  std::istringstream in(path);
  for (std::string w; in >> w;) words.push_back(w);
  args.insert(args.end(), words.rbegin(), words.rend());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw_usage_error(e.what(), {}, fmt::format("run `orion {} --help`", path));
  }
}

std::optional<std::string> tokenizer_beside(const std::string& model_path) {
  namespace fs = std::filesystem;
  if (gguf_has_tokenizer(model_path)) return model_path;  // a GGUF model carries its own
  fs::path dir = fs::is_directory(model_path) ? fs::path(model_path) : fs::path(model_path).parent_path();
  if (dir.empty()) dir = ".";
  for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer.bin", "vocab.json", "encoder.json"})
    if (fs::exists(dir / name)) return (dir / name).string();
  return std::nullopt;
}

std::string find_tokenizer_beside(const std::string& model_path) {
  if (std::optional<std::string> found = tokenizer_beside(model_path)) return *found;
  throw_usage_error(fmt::format("no tokenizer given and none found beside {}", model_path), "--tokenizer",
                    "pass --tokenizer PATH (tokenizer.bin, tokenizer.json, vocab.json, encoder.json or a .model)");
}

void note_flags_ignored_on_resume(CLI::App* cmd, const char* who) {
  for (const char* flag :
       {"--config", "--init", "--data",     "--tokenizer",  "--vocab",        "--batch",         "--seq",
        "--accum",  "--lr",   "--schedule", "--warmup",     "--min-lr-ratio", "--weight-decay",  "--beta1",
        "--beta2",  "--clip", "--seed",     "--sequential", "--plain",        "--max-bad-steps", "--sanitize-grads"})
    if (cmd->get_option_no_throw(flag) != nullptr && cmd->count(flag) > 0)
      std::fprintf(stderr, "%s: note: %s is ignored with --resume (the checkpoint's value continues the run as started)\n",
                   who, flag);
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
    threads.threads =
        std::max(1, int(std::thread::hardware_concurrency()) / std::max(1, train::dist::launcher_local_size()));
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
