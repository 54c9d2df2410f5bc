// Full training: every parameter of a model is trained, from data in to a model file out.
//
//   Trainer t(opt);        // tokenizer, data, model (fresh, --init or resumed), optimiser
//   TrainResult r = t.run();  // steps until opt.steps (or stop_after), checkpoints, final export
//
// The Trainer sets a run up and hands it to the one training loop (training_loop.h) with the
// trainable set "all parameters" (FullParameters, trainer.cpp); LoRA fine-tuning
// (lora/lora_train.h) runs the same loop over an adapter instead. The options, the learning-rate
// schedule and llm.c's plain settings are in train_options.h.
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
#include <vector>

#include <nlohmann/json.hpp>

#include "train/loop/checkpoint.h"
#include "train/loop/train_options.h"
#include "train/loop/trainable.h"
#include "train/loop/training_loop.h"
#include "train/model/trainer_api.h"

namespace orion {
class Tokenizer;
namespace data {
class TokenDataset;
struct Batch;
}
namespace train::dist {
class Communicator;
}
}  // namespace orion

namespace orion::train {

class Trainer {
 public:
  // Data parallel (dist/communicator.h): with a communicator of N ranks, --batch is per rank, rank r
  // trains on rows [r·B, (r+1)·B) of each global batch, gradients are all-reduced, and only rank 0
  // writes files or prints. Null: one process.
  explicit Trainer(TrainOptions opt, dist::Communicator* comm = nullptr);
  ~Trainer();

  TrainResult run() { return loop_->run(); }
  StepStats step() { return loop_->step(); }      // one optimisation step (guarded)
  StepStats step_on(const std::vector<data::Batch>& batches) { return loop_->step_on(batches); }  // given tokens
  void set_total_steps(int64_t steps) { loop_->set_total_steps(steps); }
  float evaluate() { return loop_->evaluate(); }  // mean validation loss (−1 without validation data)
  std::string save() { return loop_->save(); }    // a checkpoint of the current state; returns its path
  std::string export_model(const std::string& path_or_empty = "");
  std::string sample(const std::string& prompt, int tokens);  // greedy text from the current weights
  // Entropy of the training tokens' unigram distribution, in nats per token: the loss of the best
  // model that ignores context. A trained model's validation loss should fall clearly below it.
  double unigram_entropy() const;

  // Test hook: called after backward, before the guards, with the step index and the gradients.
  std::function<void(int64_t, Grads&)> after_backward;

  const TrainOptions& options() const { return opt_; }
  const Params& params() const { return *params_; }
  const Grads& grads() const { return *grads_; }  // of the last step (before clipping)
  const AdamW& optimizer() const { return *opt_adam_; }
  const CheckpointState& state() const { return state_; }
  int64_t step_index() const { return state_.step; }
  const LossScaler& loss_scaler() const { return loop_->loss_scaler(); }

 private:
  void setup_tokenizer_and_data();
  void setup_model(const Checkpoint* resumed);
  void setup_loop();
  std::unique_ptr<Checkpoint> load_resumed(std::string* used);  // rank 0 reads it, the others receive it
  void check_ranks_agree();                                     // same options, model, data and state on every rank

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
  uint64_t rank0_tokenizer_hash_ = 0;      // the tokenizer rank 0 set up (data-parallel runs)
  AneBlocks* ane_ = nullptr;               // the ANE runner (nullptr on the CPU backend)
  std::unique_ptr<TrainableSet> trained_;  // all parameters (trainer.cpp)
  std::unique_ptr<TrainingLoop> loop_;
};

// A model configuration from a preset name or a JSON file ({"arch": "llama", "dim": 64, ...}).
ModelConfig resolve_model_config(const std::string& name_or_path);

}  // namespace orion::train
