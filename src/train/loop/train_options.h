// The options of a training run, shared by full training (trainer.h) and LoRA fine-tuning
// (lora/lora_train.h), and what a run reports at its end.
//
// Learning rate at step s (0-based) of S, with W warmup steps and peak lr:
//   s < W:      lr · (s+1)/W                                   (linear warmup)
//   cosine:     min + ½(lr − min)(1 + cos(π·(s−W)/(S−W)))     with min = lr·min_lr_ratio
//   constant:   lr
// llm.c's plain settings are schedule=constant, warmup=0, clip=0, weight_decay=0, sequential batches
// (TrainOptions::plain()).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/cpu/train_kernels.h"
#include "train/ane/ane_blocks.h"
#include "train/loop/progress.h"
#include "train/model/activation_checkpointing.h"

namespace orion::train {

struct TrainOptions {
  // What to train.
  std::string config = "stories260k";  // a preset name or a JSON file of dimensions
  std::string init;                    // a model file to fine-tune from (any format) instead of an init
  std::string data = "builtin";        // builtin[:N[:SEED]], a prepared folder or a token file
  std::string tokenizer;               // path; empty with builtin data: train a BPE tokenizer of `vocab`
  int vocab = 512;
  // Batches: B rows of T tokens, `accum` micro-batches per step.
  int batch = 8, seq = 128, accum = 1;
  bool shuffle = true;  // false: llm.c's sequential order
  int64_t steps = 200;  // total optimisation steps of the run
  // Optimiser and schedule.
  float lr = 2e-3f;
  std::string schedule = "cosine";  // cosine | constant
  int warmup = -1;                  // steps; −1: 5% of steps (at most 100)
  float min_lr_ratio = 0.1f;
  float weight_decay = 0.1f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float clip = 1.0f;     // global-norm clipping; 0: none
  uint64_t seed = 1337;  // init, data order, samples
  // Guards.
  int max_bad_steps = 5;        // stop after this many consecutive skipped steps
  bool sanitize_grads = false;  // NaN → 0, ±Inf → ±65504 in the gradients instead of skipping
  // Where the transformer blocks run: cpu, or anesim / ane — ANE programs (train/ane/ane_blocks.h),
  // with `ane` holding the chip, the weight-update strategy and how often updates are verified.
  std::string backend = "cpu";
  AneTrainOptions ane;
  // Mixed precision (cpu backend): the training products' operands in fp32, bf16 or fp16, summed in
  // fp32, with fp32 master weights and AdamW (runtime/cpu/train_kernels.h). loss_scale: auto, none,
  // dynamic or a number (train/loop/loss_scaler.h); auto is dynamic for fp16 and none otherwise.
  std::string precision = "fp32";
  std::string loss_scale = "auto";
  int loss_scale_window = 2000;  // dynamic: clean steps before the scale doubles
  // Gradient checkpointing (train/model/activation_checkpointing.h): none, blocks or every-N.
  std::string checkpoint_activations = "none";
  // Evaluation, logging, checkpoints, output.
  int eval_every = 100;  // 0: only at the end
  int eval_batches = 8;
  int log_every = 0;                // 0: about 40 lines per run
  int checkpoint_every = 100;       // 0: only at the end
  int keep = 3;                     // checkpoints kept
  std::string out = "orion-train";  // the run folder
  std::string ckpt_dir;             // checkpoints folder ("": OUT/checkpoints)
  std::string metrics;              // metrics log: *.csv or *.jsonl ("": OUT/metrics.jsonl)
  std::string resume;               // run folder, checkpoints folder or file
  int64_t stop_after = 0;           // > 0: stop this process after that many steps (checkpointed)
  std::string export_format;        // "": llama2c for Llama, llmc for GPT-2; "none": no export
  int sample_tokens = 48;           // greedy sample at every evaluation and at the end (0: none)
  bool progress = true;             // report progress (on_progress; rank 0 alone)
  ProgressCallback on_progress;     // where the loop's progress events go (progress.h); none: silent

  // llm.c's plain settings (see the top of this file).
  void plain() { schedule = "constant", warmup = 0, clip = 0, weight_decay = 0, shuffle = false; }
  int warmup_steps() const;
  float lr_at(int64_t step) const;
  // checkpoint_activations parsed; usage error for a bad value or a backend without it.
  ActivationCheckpointing activation_checkpointing() const;
  // loss_scale resolved ("auto" → dynamic for fp16, else none); usage error for a bad value.
  std::string loss_scale_mode() const;
  cpu::GemmPrecision gemm_precision() const;  // precision parsed
  // The options that shape the numbers, as stored in a checkpoint, and back onto this object.
  nlohmann::json numeric_json() const;
  void apply_numeric_json(const nlohmann::json& j, const std::string& source);
  // Usage errors for values no run can use (--batch, --seq, --accum, --steps, --lr, --schedule).
  void validate() const;
  std::string checkpoint_dir() const;  // ckpt_dir, else OUT/checkpoints
  std::string metrics_path() const;    // metrics, else OUT/metrics.jsonl
};

struct TrainResult {
  int64_t steps_done = 0;  // total steps of the run so far (== the last step index + 1)
  int64_t skipped_steps = 0;
  float first_loss = 0, last_loss = 0, val_loss = -1;  // val −1: no validation data
  double seconds = 0, tokens_per_second = 0;
  std::string checkpoint, model;  // last checkpoint written, exported model or adapter ("" when none)
  std::string tokenizer;
  // Data-parallel runs (dist/): ranks, gradient bytes all-reduced per step, share of step time in
  // all-reduce calls. tokens_per_second counts every rank's tokens.
  int world = 1;
  uint64_t bytes_reduced_per_step = 0;
  double comm_share = 0;
};

}  // namespace orion::train
