// What a training run optimises: the trainable set. The one training loop (training_loop.h) runs
// the same step for every kind of training and asks this object only what differs:
//
//   FullParameters (trainer.cpp)   every parameter of the model; AdamW over all of them; after a
//                                  step the block runner is told the weights changed; checkpoints
//                                  are ckpt_<step>.ckpt; the export is a model file.
//   LoraAdapterSet (lora_trainer.cpp) the A, B factors of a LoRA adapter over a frozen base; the
//                                  gradients come from the blocks (or dW'), after a step W' is
//                                  re-merged or the programs' adapter inputs refreshed; checkpoints
//                                  are lora_<step>.olora; the export is the adapter (Orion / PEFT).
//
// A step of the loop, in terms of this interface:
//   zero_grads(); forward + backward per micro-batch; gradients_done();
//   [all-reduce grads() over the ranks]; norm = grad_norm(); update(lr, norm)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "train/loop/checkpoint.h"

namespace orion::train {

class TrainableSet {
 public:
  virtual ~TrainableSet() = default;
  virtual void zero_grads() = 0;    // before a step's micro-batches
  virtual void gradients_done() {}  // after their backward passes (a finite loss)
  virtual float* grads() = 0;       // the gradients of the trained values: size() floats
  virtual size_t size() const = 0;
  virtual double grad_norm() = 0;  // ‖g‖₂ before clipping, as AdamW computes it
  // AdamW at learning rate lr (norm: grad_norm()'s value), then whatever must follow a change of
  // the trained values (the block runner told, W' re-merged).
  virtual void update(float lr, double norm) = 0;
  virtual int64_t adam_steps() const = 0;
  virtual const char* name() const = 0;  // "parameters", "adapter": in messages to the user
  // A hash of the trained values' bytes (the ranks of a data-parallel run must agree).
  virtual uint64_t values_hash() const = 0;
  // Writes a checkpoint of the values, the optimiser and `state` into dir, keeps the newest
  // `keep` (≤ 0: all); returns its path. Rank 0 only.
  virtual std::string save_checkpoint(const std::string& dir, const CheckpointState& state, int keep) = 0;
  // The finished run's result file(s): a model, an adapter; "" when none (called on every rank).
  virtual std::string export_result() = 0;
};

}  // namespace orion::train
