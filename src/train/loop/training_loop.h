// The training loop: one for every kind of training. What is trained (all parameters, or a LoRA
// adapter over a frozen base) is a TrainableSet (trainable.h); the loop does the rest the same way
// for both:
//
//   TrainingLoop loop(opt, comm, model, trained, train_data, val_data, state);
//   TrainResult r = loop.run();   // steps until opt.steps (or stop_after, or Ctrl-C / SIGUSR1)
//
// One step (step()): zero the gradients; for each of `accum` micro-batches run forward and
// backward(1/accum) so the gradients average over B·T·accum tokens; with several ranks, the loss
// and the trained gradients are all-reduced (dist/data_parallel.h); check the loss and the gradient
// norm (guards.h); AdamW with the scheduled learning rate (TrainOptions::lr_at).
//
// run() adds evaluation every eval_every steps, the metrics log (one line per step, *.csv or
// *.jsonl; a resumed run drops the lines of the steps it redoes), checkpoints every
// checkpoint_every steps and at the end (rank 0 writes; the ranks first check that their trained
// values are still the same bits), a clean stop on Ctrl-C or SIGUSR1 (finish the step, checkpoint,
// return), and the export when the run is complete. Progress goes to TrainOptions::on_progress as
// events (progress.h); the loop prints nothing itself.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cpu/bf16_weight_packs.h"
#include "train/loop/train_options.h"
#include "train/loop/loss_scaler.h"
#include "train/loop/trainable.h"

namespace orion {
class Timer;
namespace data {
class TokenDataset;
struct Batch;
}
namespace train {
class AneBlocks;
class TrainModel;
namespace dist {
class Communicator;
}
}  // namespace train
}  // namespace orion

namespace orion::train {

// A Note event (a line of setup news) to opt.on_progress, when progress is reported.
void report_note(const TrainOptions& opt, const std::string& line);

// This rank's rows of the "train" split of `path` (batches of opt.batch × opt.seq, shuffled unless
// opt.shuffle is off), and of its "val" split when `path` is a prepared folder that has one (else
// null, with a Note from `who`). vocab_size > 0: tokens at or above it are refused.
struct TrainingData {
  std::unique_ptr<data::TokenDataset> train, val;
};
TrainingData open_training_data(const std::string& path, const TrainOptions& opt, dist::Communicator& comm, int vocab_size,
                                const std::string& who);

class TrainingLoop {
 public:
  // Every argument outlives the loop; `state` is where the run stands (resumed or fresh) and is
  // advanced by each step.
  TrainingLoop(TrainOptions& opt, dist::Communicator& comm, TrainModel& model, TrainableSet& trained,
               data::TokenDataset& train, data::TokenDataset* val, CheckpointState& state);
  ~TrainingLoop();

  TrainResult run();
  StepStats step();    // one optimisation step (guarded)
  // The same step on given micro-batches (each --batch × --seq tokens; their number is the step's
  // accumulation) instead of the data's next ones: a hand-written loop over the caller's tokens.
  StepStats step_on(const std::vector<data::Batch>& batches);
  void set_total_steps(int64_t steps) { opt_.steps = steps; }  // the schedule's S; run() stops there
  float evaluate();    // mean validation loss over eval_batches (−1 without validation data)
  std::string save();  // a checkpoint of the current state; its path on rank 0, "" on the others

  std::string what;  // the Start event's text: what is trained
  // Called after backward, before the guards, with the step index (tests inspect the gradients).
  std::function<void(int64_t)> after_backward;
  // Greedy text of `tokens` tokens from the current weights, for the Sample events (none: no samples).
  std::function<std::string(int)> sample;
  AneBlocks* ane = nullptr;  // the ANE runner, for the compile count of the Step events
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  const LossScaler& loss_scaler() const { return scaler_; }

 private:
  bool reporting() const;
  void emit(ProgressEvent e) const;
  void report_start();
  void report_step(const StepStats& s, float val);
  void append_metrics(const StepStats& s, float val);
  bool interrupted();
  // With loss scaling: the gradients divided by the scale; false when one is not finite (or the
  // ANE path repaired one since `repaired_before`: an fp16 overflow it hid).
  bool unscale_gradients(size_t repaired_before);
  StepStats step_batches(const std::vector<data::Batch>& batches, const Timer& timer);

  TrainOptions& opt_;
  dist::Communicator& comm_;
  TrainModel& model_;
  TrainableSet& trained_;
  data::TokenDataset& train_;
  data::TokenDataset* val_;
  CheckpointState& state_;
  LossScaler scaler_;
  cpu::GemmPrecision precision_before_;  // the process's GEMM precision, restored by the destructor
  cpu::ScopedBf16WeightPacks weight_packs_;  // bf16: weights packed once per update (bf16_weight_packs.h)
  int consecutive_bad_ = 0;
  double run_seconds_ = 0;
  int64_t run_steps_ = 0;
  std::string last_checkpoint_;
};

}  // namespace orion::train
