// LoRA fine-tuning: trains an adapter (model/lora/lora.h) on a frozen base model.
//
// The gradient, exactly. A layer's working weight is W' = W + s·B·A (W [out, in] frozen, A [r, in],
// B [out, r], s = alpha/r). For a projection y = W'·x over N rows X [N, in] with output gradient
// dY [N, out]:
//   ∂loss/∂B = s·dYᵀ·(X·Aᵀ)   [out, r]          ∂loss/∂A = s·(dY·B)ᵀ·X   [r, in]
// The block runners report X and dY of every adapted projection (AdapterGradSink, trainer_api.h)
// and compute no weight gradient of the frozen base at all — the LoRA-only backward: a step costs
// the forward, the input gradients and O(N·r·(in + out)) per adapted matrix. A runner that cannot
// (the GPT-2 ANE runner) computes dW' = dYᵀ·X, and since W' is linear in each factor,
//   ∂loss/∂B = s·dW'·Aᵀ            ∂loss/∂A = s·Bᵀ·dW'
// (tests/train/test_lora_train.cpp checks both ways against finite differences). After each AdamW
// step on the adapter the adapted matrices of W' are rebuilt from the frozen copies of W, so the
// base never drifts: with B = 0, W' is W bit for bit, and every tensor that is not adapted is never
// written at all.
//
// LoraTrainer sets a run up — the base model and its tokenizer, data (a prepared folder or token
// file, or text — files, builtin[:N] — tokenized with the base model's tokenizer into out/data),
// the adapter (fresh, or resumed from the newest checkpoint) — and hands it to the one training loop
// (loop/training_loop.h) with the trainable set "the adapter" (LoraAdapterSet, lora_trainer.cpp):
// the same steps as full training (gradient accumulation, the NaN/Inf guard, the schedule of
// TrainOptions), validation loss, the metrics log, checkpoints (CKPT_DIR/lora_<step>.olora: adapter
// + AdamW moments + state, the newest `keep` kept; --resume continues bit for bit with the data and numeric options stored in the checkpoint), a clean stop on
// Ctrl-C / SIGUSR1, and the adapter written at the end in Orion's format and/or the PEFT layout.
//
// On the ANE path (train.backend anesim | ane), Llama or GPT-2 with adapters on q and v: the base is baked
// into the programs once and A, B are program inputs (make_lora_ane_blocks, ane_blocks.h) — the
// working parameters stay the base bit for bit, nothing is merged, and the compile count is constant
// for the whole run; dA, dB come from the ANE's xnorm and dq (before RoPE), dv, on the CPU. Other
// targets run the plain ANE runner on the merged W' (streamed as weights-as-inputs after every step).
//
// Data parallel (dist/communicator.h, docs/distributed.md) by the same loop as full training: under
// mpirun every rank holds the base and the adapter, reads its rows of each global batch (--batch is
// per rank), and only the adapter's gradients are all-reduced — rank·in + out·rank floats per
// adapted matrix, a few MB even for Stories110M, instead of the whole model's. Rank 0 alone
// prints and writes checkpoints and the adapter; a resume reads rank 0's newest checkpoint.
#pragma once
#include <memory>
#include <string>

#include "model/lora/lora.h"
#include "train/ane/ane_blocks.h"
#include "train/lora/lora_base16.h"
#include "train/loop/train_options.h"
#include "train/loop/training_loop.h"
#include "train/model/trainer_api.h"

namespace orion {
struct LoraTrainingState;
}

namespace orion::train {

// The adapter, its gradients and the frozen base copies of the adapted matrices, over the working
// parameters a TrainModel runs on. Two ways to the adapter gradient:
//   * direct (the sink of AdapterGradSink, when the block runner supports freeze_base): from each
//     adapted projection's input X [N, in] and output gradient dY [N, out],
//       u = X·Aᵀ [N, r],  dB += s·dYᵀ·u [out, r];    v = dY·B [N, r],  dA += s·vᵀ·X [r, in]
//     — no dW' is ever formed, and the runner skips every frozen dW (the LoRA-only backward);
//   * from dW' (gather), for runners that compute every weight gradient.
class LoraTraining : public AdapterGradSink {
 public:
  // work holds the base weights (fp32); the adapter must fit them. merged: W' = W + s·B·A is kept in
  // work (the CPU blocks, the merged ANE path); otherwise work stays the base bit for bit and the
  // blocks apply the adapter themselves (the ANE runner with adapter inputs).
  LoraTraining(Params& work, LoraAdapter adapter, bool merged = true);

  LoraAdapter& adapter() { return adapter_; }
  const LoraAdapter& adapter() const { return adapter_; }
  float* grads() { return grads_.data(); }  // the adapter buffer's layout
  const float* grads() const { return grads_.data(); }
  void zero_grads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }
  // dA, dB from the model's gradients (after backward), written (not accumulated).
  void gather(const Grads& g);
  // AdapterGradSink: dA, dB accumulated from X and dY of one adapted projection.
  bool adapted(int layer, LoraTarget t) const override { return adapter_.find(layer, t) != nullptr; }
  void projection(int layer, LoraTarget t, const float* x, const float* dy, int N) override;
  // W' = W + s·B·A into the working parameters, from the frozen W, for every adapted matrix
  // (nothing when not merged).
  void merge_into_work();
  bool merged() const { return merged_; }
  // What merge_into_work changes in the working parameters: each adapted matrix (pointer, length),
  // or nothing when not merged.
  std::vector<std::pair<const float*, size_t>> merged_matrices();
  // The frozen base matrix W [out, in] of adapter tensor i (adapter().tensors()[i]).
  const float* base_matrix(size_t i) const;
  std::vector<std::pair<size_t, size_t>> layout() const;  // (offset, numel) of every A and B

 private:
  float* work_matrix(const LoraTensor& t);
  const float* grad_matrix(const Grads& g, const LoraTensor& t) const;
  Params& work_;
  LoraAdapter adapter_;
  bool merged_;
  std::vector<std::vector<float>> base_;  // merged: per adapter tensor, W [out, in]
  std::vector<float> grads_;
  std::vector<float> u_, v_;  // [N, r] scratch of projection()
};

struct LoraTrainOptions {
  TrainOptions train;  // data, tokenizer, batch, seq, accum, steps, lr, schedule, clip, eval, checkpoints, out, seed
  std::string model;   // the base model (any format load_model reads)
  int rank = 16;
  float alpha = 16.0f;
  std::string targets = "q,v";
  std::string format = "both";  // the adapter at the end: orion | peft | both
  // Continue from the newest good checkpoint: of train.resume (a folder or a lora_*.olora file)
  // when set, else of the checkpoints folder (train.checkpoint_dir()).
  bool resume = false;
  std::string base_dtype = "f32";  // f16 | bf16: the frozen block matrices kept in 16 bits (CPU; lora_base16.h)
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

  TrainResult run() { return loop_->run(); }  // steps until opt.train.steps; the adapter in TrainResult::model
  StepStats step() { return loop_->step(); }
  StepStats step_on(const std::vector<data::Batch>& batches) { return loop_->step_on(batches); }  // given tokens
  void set_total_steps(int64_t steps) { loop_->set_total_steps(steps); }
  float evaluate() { return loop_->evaluate(); }  // mean validation loss (−1 without validation data)
  std::string save() { return loop_->save(); }    // a checkpoint; returns its path
  std::string export_adapter();

  const LoraAdapter& adapter() const { return lora_->adapter(); }
  // The adapter's values may be changed (another adapter of the same shape swapped in); then call
  // adapter_changed(), which re-merges W' (CPU) or refreshes the programs' adapter inputs (ANE).
  LoraAdapter& adapter() { return lora_->adapter(); }
  void adapter_changed() {
    lora_->merge_into_work();
    model_->weights_updated(lora_->merged_matrices());
  }
  const LoraTraining& lora() const { return *lora_; }
  // The working parameters: W' (merged) with unadapted tensors = the base's; the base itself on the
  // ANE adapter-input path; without the block matrices with --base-dtype f16/bf16.
  const Params& work() const { return *work_; }
  const ModelWeights& base() const { return *base_; }
  AneBlocks* ane_blocks() { return ane_; }                 // the ANE runner (nullptr on the CPU backend)
  bool direct_gradients() const { return direct_grads_; }  // the LoRA-only backward is in use
  // Bytes held for the frozen base's block matrices: fp32 working copies (+ the frozen copies of the
  // adapted ones), or with --base-dtype f16/bf16 the 16-bit matrices plus the one-layer fp32 buffer.
  size_t base_bytes() const;
  int64_t step_index() const { return state_.step; }
  const CheckpointState& state() const { return state_; }

 private:
  LoraAdapter load_resumed(LoraTrainingState* resumed);  // rank 0 reads it, the others receive it
  void setup_model(LoraAdapter adapter);
  void setup_data();
  void check_ranks_agree();
  LoraTrainOptions opt_;
  std::unique_ptr<dist::Communicator> own_comm_;
  dist::Communicator* comm_ = nullptr;
  std::unique_ptr<ModelWeights> base_;     // with a 16-bit base: the config only (the matrices are base16_'s)
  std::unique_ptr<Base16Weights> base16_;  // --base-dtype f16|bf16
  Base16Blocks* blocks16_ = nullptr;
  std::unique_ptr<Params> work_;
  std::unique_ptr<Grads> grads_;
  std::unique_ptr<TrainModel> model_;
  std::unique_ptr<LoraTraining> lora_;
  std::unique_ptr<AdamW> adam_;
  AneBlocks* ane_ = nullptr;
  bool direct_grads_ = false;  // the blocks give dA, dB from X and dY (no dW' formed)
  std::unique_ptr<data::TokenDataset> train_, val_;
  CheckpointState state_;
  std::unique_ptr<TrainableSet> trained_;  // the adapter (lora_trainer.cpp)
  std::unique_ptr<TrainingLoop> loop_;
};

}  // namespace orion::train
