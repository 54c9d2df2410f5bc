// The training loop: data in, optimisation steps, evaluation, progress, checkpoints, export.
//
//   Trainer t(opt);        // tokenizer, data, model (fresh, --init or resumed), optimiser
//   TrainResult r = t.run();  // steps until opt.steps (or stop_after), checkpoints, final export
//
// One step (step()): zero the gradients; for each of `accum` micro-batches run forward and
// backward(1/accum) so the gradients average over B·T·accum tokens; check the loss and the
// gradient norm (guards.h); AdamW with the scheduled learning rate; tell the block runner.
//
// Learning rate at step s (0-based) of S, with W warmup steps and peak lr:
//   s < W:      lr · (s+1)/W                                   (linear warmup)
//   cosine:     min + ½(lr − min)(1 + cos(π·(s−W)/(S−W)))     with min = lr·min_lr_ratio
//   constant:   lr
// llm.c's plain settings are schedule=constant, warmup=0, clip=0, weight_decay=0, sequential batches
// (TrainOptions::plain()).
//
// Run folder (--out): tokenizer.bin (trained for builtin data unless given), data/ (the built-in
// corpus, tokenized once per tokenizer), checkpoints/ckpt_<step>.ckpt (or --ckpt-dir), metrics.jsonl
// (or --metrics FILE.csv|.jsonl; one line per
// step), model.bin (or model.safetensors/) at the end. Resume reads the newest good checkpoint and
// takes the numeric options from it, so the continued run equals the uninterrupted one bit for bit.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "train/loop/checkpoint.h"
#include "train/ane/ane_blocks.h"
#include "train/model/trainer_api.h"

namespace orion {
class Tokenizer;
namespace data {
class TokenDataset;
}
namespace train::dist {
class Communicator;
}
}  // namespace orion

namespace orion::train {

struct TrainOptions {
  // What to train.
  std::string config = "stories260k";  // a preset name or a JSON file of dimensions
  std::string init;                     // a model file to fine-tune from (any format) instead of an init
  std::string data = "builtin";         // builtin[:N[:SEED]], a prepared folder or a token file
  std::string tokenizer;                // path; empty with builtin data: train a BPE tokenizer of `vocab`
  int vocab = 512;
  // Batches: B rows of T tokens, `accum` micro-batches per step.
  int batch = 8, seq = 128, accum = 1;
  bool shuffle = true;                  // false: llm.c's sequential order
  int64_t steps = 200;                  // total optimisation steps of the run
  // Optimiser and schedule.
  float lr = 2e-3f;
  std::string schedule = "cosine";      // cosine | constant
  int warmup = -1;                      // steps; −1: 5% of steps (at most 100)
  float min_lr_ratio = 0.1f;
  float weight_decay = 0.1f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float clip = 1.0f;                    // global-norm clipping; 0: none
  uint64_t seed = 1337;                 // init, data order, samples
  // Guards.
  int max_bad_steps = 5;                // stop after this many consecutive skipped steps
  bool sanitize_grads = false;          // NaN → 0, ±Inf → ±65504 in the gradients instead of skipping
  // Where the transformer blocks run: cpu, or anesim / ane — ANE programs (train/ane/ane_blocks.h),
  // with `ane` holding the chip, the weight-update strategy and how often updates are verified.
  std::string backend = "cpu";
  AneTrainOptions ane;
  // Evaluation, logging, checkpoints, output.
  int eval_every = 100;                 // 0: only at the end
  int eval_batches = 8;
  int log_every = 0;                    // 0: about 40 lines per run
  int checkpoint_every = 100;           // 0: only at the end
  int keep = 3;                         // checkpoints kept
  std::string out = "orion-train";      // the run folder
  std::string ckpt_dir;                 // checkpoints folder ("": OUT/checkpoints)
  std::string metrics;                  // metrics log: *.csv or *.jsonl ("": OUT/metrics.jsonl)
  std::string resume;                   // run folder, checkpoints folder or file
  int64_t stop_after = 0;               // > 0: stop this process after that many steps (checkpointed)
  std::string export_format;            // "": llama2c for Llama, llmc for GPT-2; "none": no export
  int sample_tokens = 48;               // greedy sample at every evaluation and at the end (0: none)
  bool progress = true;                 // progress lines on stderr

  // llm.c's plain settings (see the top of this file).
  void plain() { schedule = "constant", warmup = 0, clip = 0, weight_decay = 0, shuffle = false; }
  int warmup_steps() const;
  float lr_at(int64_t step) const;
  // The options that shape the numbers, as stored in a checkpoint, and back onto this object.
  nlohmann::json numeric_json() const;
  void apply_numeric_json(const nlohmann::json& j, const std::string& source);
};

struct StepStats {
  int64_t step = 0;       // index of the step (0-based)
  float loss = 0;         // mean over the accum micro-batches
  float grad_norm = 0;    // before clipping
  float lr = 0;
  double seconds = 0;
  bool skipped = false;
  size_t sanitized = 0;   // gradient values repaired (sanitize_grads)
  double comm_seconds = 0;  // inside all-reduce calls (data-parallel runs)
};

struct TrainResult {
  int64_t steps_done = 0;     // total steps of the run so far (== the last step index + 1)
  int64_t skipped_steps = 0;
  float first_loss = 0, last_loss = 0, val_loss = -1;  // val −1: no validation data
  double seconds = 0, tokens_per_second = 0;
  std::string checkpoint, model;  // last checkpoint written, exported model ("" when none)
  std::string tokenizer;
  // Data-parallel runs (dist/): ranks, gradient bytes all-reduced per step, share of step time in
  // all-reduce calls. tokens_per_second counts every rank's tokens.
  int world = 1;
  uint64_t bytes_reduced_per_step = 0;
  double comm_share = 0;
};

class Trainer {
 public:
  // Data parallel (dist/communicator.h): with a communicator of N ranks, --batch is per rank, rank r
  // trains on rows [r·B, (r+1)·B) of each global batch, gradients are all-reduced, and only rank 0
  // writes files or prints. Null: one process.
  explicit Trainer(TrainOptions opt, dist::Communicator* comm = nullptr);
  ~Trainer();

  TrainResult run();
  StepStats step();       // one optimisation step (guarded)
  float evaluate();       // mean validation loss over eval_batches (−1 without validation data)
  std::string save();     // a checkpoint of the current state; returns its path
  std::string export_model(const std::string& path_or_empty = "");
  std::string sample(const std::string& prompt, int tokens);  // greedy text from the current weights
  // Entropy of the training tokens' unigram distribution, in nats per token: the loss of the best
  // model that ignores context. A trained model's validation loss should fall clearly below it.
  double unigram_entropy() const;

  // Test hook: called after backward, before the guards, with the step index and the gradients.
  std::function<void(int64_t, Grads&)> after_backward;

  const TrainOptions& options() const { return opt_; }
  const Params& params() const { return *params_; }
  const AdamW& optimizer() const { return *opt_adam_; }
  const CheckpointState& state() const { return state_; }
  int64_t step_index() const { return state_.step; }

 private:
  void setup_tokenizer_and_data();
  void setup_model(const Checkpoint* resumed);
  void log_step(const StepStats& s, float val);
  void append_metrics(const StepStats& s, float val);
  std::string checkpoint_dir() const;
  std::string metrics_path() const;
  std::unique_ptr<Checkpoint> load_resumed(std::string* used);  // rank 0 reads it, the others receive it
  void check_ranks_agree();                    // same options, model, data and state on every rank

  TrainOptions opt_;
  std::unique_ptr<dist::Communicator> own_comm_;
  dist::Communicator* comm_ = nullptr;
  CheckpointState state_;
  std::unique_ptr<Params> params_;
  std::unique_ptr<Grads> grads_;
  std::unique_ptr<TrainModel> model_;
  std::unique_ptr<AdamW> opt_adam_;
  std::unique_ptr<data::TokenDataset> train_, val_;
  std::unique_ptr<Tokenizer> tokenizer_;
  uint64_t rank0_tokenizer_hash_ = 0;  // the tokenizer rank 0 set up (data-parallel runs)
  int consecutive_bad_ = 0;
  double run_seconds_ = 0;
  int64_t run_steps_ = 0;
  std::string last_checkpoint_;
};

// A model configuration from a preset name or a JSON file ({"arch": "llama", "dim": 64, ...}).
ModelConfig resolve_model_config(const std::string& name_or_path);

}  // namespace orion::train
