// What the training loop tells its caller while it runs. The loop never writes to stderr itself:
// it hands events to TrainOptions::on_progress, and the caller decides how to show them (the CLI's
// printer is tools/train_progress.h; a test or a server may collect or forward them instead).
//
//   Note         a line of setup news (tokenizer learned, data tokenized, resuming from …)
//   Start        the run begins: what is trained, the data, the first step
//   Step         one optimisation step done (every step; the printer picks which to show)
//   Sample       greedy text from the current weights (at evaluations, and `final` at the end)
//   Interrupted  Ctrl-C / SIGUSR1 seen: the loop stops after this step and writes a checkpoint
//   Done         the run's result
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace orion::train {

struct TrainOptions;
struct TrainResult;

struct StepStats {
  int64_t step = 0;     // index of the step (0-based)
  float loss = 0;       // mean over the accum micro-batches
  float grad_norm = 0;  // before clipping
  float lr = 0;
  double seconds = 0;
  bool skipped = false;
  size_t sanitized = 0;     // gradient values repaired (sanitize_grads)
  double comm_seconds = 0;  // inside all-reduce calls (data-parallel runs)
  float loss_scale = 0;     // the loss scale the step ran with (0: no loss scaling)
};

struct ProgressEvent {
  enum class Kind { Note, Start, Step, Sample, Interrupted, Done };
  Kind kind = Kind::Note;
  const TrainOptions* options = nullptr;  // the run's options (after a resume: those that continue it)
  std::string text;                       // Note: the line; Start: what is trained; Sample: the text
  // Start: the data and the ranks.
  uint64_t train_tokens = 0, batches_per_epoch = 0;
  int64_t val_tokens = -1;  // −1: no validation split
  int world = 1;
  std::string comm;        // the communicator's description (world > 1)
  int64_t first_step = 0;  // where this process starts (> 0 after a resume)
  // Step: the step's figures and where the run stands after it.
  StepStats stats;
  int64_t done = 0;  // steps of the run done, this one included
  int64_t skipped_total = 0;
  float val_loss = -1;    // validation loss after this step (−1: not evaluated)
  int64_t run_steps = 0;  // steps this process ran, and their time
  double run_seconds = 0;
  // The block runner's per-phase times since the last call ("" on the CPU): call it only for the
  // steps that are shown, so a shown line covers the steps since the previous one.
  std::function<std::string()> phases;
  int64_t compiles = -1;  // ANE programs compiled so far (−1: not on the ANE)
  // Sample: the end-of-run text (not an evaluation's).
  bool final = false;
  // Done: the result.
  const TrainResult* result = nullptr;
};

using ProgressCallback = std::function<void(const ProgressEvent&)>;

}  // namespace orion::train
