// LoRA fine-tuning: trains an adapter (model/lora/lora.h) on a frozen base model.
//
// The gradient, exactly. A layer's working weight is W' = W + s·B·A (W [out, in] frozen, A [r, in],
// B [out, r], s = alpha/r). The model — TrainModel with the ordinary CPU BlockRunners — runs on W'
// and its backward gives dW' = ∂loss/∂W' [out, in]. Since W' is linear in each factor,
//   ∂loss/∂B = s·dW'·Aᵀ   [out, r]          ∂loss/∂A = s·Bᵀ·dW'   [r, in]
// (tests/train/test_lora_train.cpp checks both against finite differences). After each AdamW step
// on the adapter the adapted matrices of W' are rebuilt from the frozen copies of W, so the base
// never drifts: with B = 0, W' is W bit for bit, and every tensor that is not adapted is never
// written at all. The cost is the full model's backward (the CPU runners compute every weight
// gradient; the unadapted ones are dropped) plus 2·out·in·r per adapted matrix for dA, dB and the
// merge — small next to the backward.
//
// LoraTrainer is the loop: the base model and its tokenizer, data (a prepared folder or token
// file, or text — files, builtin[:N] — tokenized with the base model's tokenizer into out/data),
// the warmup + cosine schedule of TrainOptions, the NaN/Inf guard (a non-finite loss or adapter
// gradient skips the step; K in a row stop the run), validation loss, progress lines, checkpoints
// (out/checkpoints/lora_<step>.olora: adapter + AdamW moments + state, the newest `keep` kept;
// --resume continues from the newest), and the adapter written at the end in Orion's format and/or
// the PEFT layout. The general Trainer (trainer.h) is untouched: LoRA reuses its pieces
// (TrainModel, AdamW, guards, datasets, options) rather than its class.
//
// On the ANE path (train.backend anesim | ane) the blocks run through train/ane_blocks.h's runner:
// forward and input-gradient programs on the ANE, dW' on the CPU from their activations, then dA,
// dB as above. The runner takes the merged W' as its weights (updated after every step through its
// verified strategies — weights as inputs on anesim, so the compile count stays constant); the
// base is not baked separately with A and B as program inputs (see bench/RESULTS.md: what is left).
//
// Data parallel (dist/communicator.h, docs/distributed.md) exactly as the general Trainer: under
// mpirun every rank holds the base and the adapter, reads its rows of each global batch (--batch is
// per rank), and only the adapter's gradients are all-reduced — rank·in + out·rank floats per
// adapted matrix, a few MB even for Stories110M, instead of the whole model's. Rank 0 alone
// prints and writes checkpoints and the adapter; a resume reads rank 0's newest checkpoint.
#pragma once
#include <memory>
#include <string>

#include "model/lora/lora.h"
#include "train/ane_blocks.h"
#include "train/trainer.h"

namespace orion::train {

// The adapter, its gradients and the frozen base copies of the adapted matrices, over the working
// parameters a TrainModel runs on.
class LoraTraining {
 public:
  // work holds the base weights (fp32); the adapter must fit them. Merges the adapter into work.
  LoraTraining(Params& work, LoraAdapter adapter);

  LoraAdapter& adapter() { return adapter_; }
  const LoraAdapter& adapter() const { return adapter_; }
  float* grads() { return grads_.data(); }  // the adapter buffer's layout
  // dA, dB from the model's gradients (after backward), written (not accumulated).
  void gather(const Grads& g);
  // W' = W + s·B·A into the working parameters, from the frozen W, for every adapted matrix.
  void merge_into_work();
  // The frozen base matrix of adapter tensor i (adapter().tensors()[i]).
  const std::vector<float>& base_matrix(size_t i) const { return base_[i]; }
  std::vector<std::pair<size_t, size_t>> layout() const;  // (offset, numel) of every A and B

 private:
  float* work_matrix(const LoraTensor& t);
  const float* grad_matrix(const Grads& g, const LoraTensor& t) const;
  Params& work_;
  LoraAdapter adapter_;
  std::vector<std::vector<float>> base_;  // per adapter tensor: W [out, in]
  std::vector<float> grads_;
};

struct LoraTrainOptions {
  TrainOptions train;        // data, tokenizer, batch, seq, steps, lr, schedule, clip, eval, checkpoints, out, seed
  std::string model;         // the base model (any format load_model reads)
  int rank = 16;
  float alpha = 16.0f;
  std::string targets = "q,v";
  std::string format = "both";  // the adapter at the end: orion | peft | both
  bool resume = false;          // continue from the newest checkpoint in out/checkpoints
  LoraTrainOptions() {
    train.lr = 1e-3f, train.weight_decay = 0.0f, train.out = "orion-lora", train.batch = 8, train.seq = 64;
    train.steps = 100, train.eval_every = 50, train.checkpoint_every = 50, train.keep = 2;
  }
};

namespace dist {
class Communicator;
}

class LoraTrainer {
 public:
  explicit LoraTrainer(LoraTrainOptions opt, dist::Communicator* comm = nullptr);
  ~LoraTrainer();

  TrainResult run();   // steps until opt.train.steps; the adapter in TrainResult::model
  StepStats step();
  float evaluate();    // mean validation loss over eval_batches (−1 without validation data)
  std::string save();  // a checkpoint; returns its path
  std::string export_adapter();

  const LoraAdapter& adapter() const { return lora_->adapter(); }
  const LoraTraining& lora() const { return *lora_; }
  const Params& work() const { return *work_; }  // W' (merged); unadapted tensors = the base's
  const ModelWeights& base() const { return *base_; }
  AneBlocks* ane_blocks() { return ane_; }  // the ANE runner (nullptr on the CPU backend)
  int64_t step_index() const { return step_; }

 private:
  void setup_data();
  void check_ranks_agree();
  LoraTrainOptions opt_;
  std::unique_ptr<dist::Communicator> own_comm_;
  dist::Communicator* comm_ = nullptr;
  std::unique_ptr<ModelWeights> base_;
  std::unique_ptr<Params> work_;
  std::unique_ptr<Grads> grads_;
  std::unique_ptr<TrainModel> model_;
  std::unique_ptr<LoraTraining> lora_;
  std::unique_ptr<AdamW> adam_;
  AneBlocks* ane_ = nullptr;
  std::unique_ptr<data::TokenDataset> train_, val_;
  std::string tokenizer_;
  int64_t step_ = 0, skipped_ = 0;
  int consecutive_bad_ = 0;
  std::string last_checkpoint_;
};

}  // namespace orion::train
