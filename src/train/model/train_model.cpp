// The whole model for training: embedding → L blocks (through a BlockRunner) → final norm →
// classifier → cross-entropy, and the backward in reverse. The blocks are the family's own files
// (train/family/<name>/); what differs here follows the family's anatomy (model/family/family.h):
// learned positions added at the input or not, LayerNorm or RMSNorm at the end.
//
//   x0 = tok_emb[tokens] (+ pos_emb[t])             [N, C]      residual stream, N = B·T
//   x_{l+1} = block_l(x_l)                          [N, C]      l = 0 .. L−1
//   xf = norm(x_L)                                  [N, C]
//   logits = xf · classifierᵀ                       [N, V]      (tied: the first V rows of tok_emb)
//   loss = mean over counted n of −log softmax(logits[n])[target n]
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "model/family/family.h"
#include "runtime/cpu/bf16_weight_packs.h"
#include "train/cpu/first_write_zero.h"
#include "train/cpu/layers.h"
#include "train/family/training_family.h"
#include "train/model/trainer_api.h"

namespace orion::train {

std::unique_ptr<BlockRunner> make_cpu_blocks(const Params& params, Grads* grads, int B, int T,
                                             const ActivationCheckpointing& ckpt) {
  return training_family(params.config().arch).cpu_blocks(params, grads, B, T, ckpt);
}

TrainModel::TrainModel(const Params& params, Grads* grads, int B, int T, const ActivationCheckpointing& ckpt)
    : p_(params), g_(grads), B_(B), T_(T), ckpt_(ckpt) {
  const ModelConfig& c = params.config();
  if (B <= 0 || T <= 0 || T > c.seq_len)
    throw_usage_error(fmt::format("batch {} × {} tokens does not fit the model (context {})", B, T, c.seq_len), "seq",
                      "use a batch of at least 1 and a sequence length within the model's context");
  if (grads) ORION_CHECK(grads->size() == params.size(), "gradients of a different layout");
  const size_t N = size_t(B) * T, C = c.dim, V = c.vocab_size;
  tokens_.resize(N), targets_.resize(N);
  assign_on_huge_pages(residual_, size_t(c.n_layers + 1) * N * C);  // the two large ones on 2 MB pages
  xf_.resize(N * C), fmean_.resize(N), frstd_.resize(N);
  assign_on_huge_pages(logits_, size_t(N) * V), losses_.resize(N), lse_.resize(N);
  if (grads) dres_[0].resize(N * C), dres_[1].resize(N * C), dxf_.resize(N * C);
  if (grads && ckpt.every > 0) recompute_out_.resize(N * C);
  blocks_ = make_cpu_blocks(params, grads, B, T, ckpt);
}

void TrainModel::set_blocks(std::unique_ptr<BlockRunner> blocks) {
  ORION_CHECK(blocks != nullptr, "no block runner");
  blocks_ = std::move(blocks);
  if (frozen_) blocks_->freeze_base(frozen_);
}

bool TrainModel::freeze_base(AdapterGradSink* sink) {
  frozen_ = sink;
  return blocks_->freeze_base(sink);
}

TrainModel::~TrainModel() {
  if (g_) forget_gradients(g_->data(), g_->size());
}

void TrainModel::zero_grad() {
  if (g_) zero_gradients(g_->data(), g_->size());
}

float TrainModel::forward(const int* tokens, const int* targets, int B, int T) {
  const ModelConfig& c = p_.config();
  if (B <= 0 || T <= 0 || B > B_ || T > T_)
    throw_usage_error(fmt::format("batch {} × {} is larger than the {} × {} this model was set up for", B, T, B_, T_),
                      "batch");
  const int N = B * T, C = c.dim, V = c.vocab_size, L = c.n_layers;
  for (int n = 0; n < N; n++)
    if (tokens[n] < 0 || tokens[n] >= V)
      throw_usage_error(fmt::format("token id {} at position {} is outside the vocabulary of {}", tokens[n], n, V), "tokens",
                        "the data was tokenized for another vocabulary");
  b_ = B, t_ = T;
  std::memcpy(tokens_.data(), tokens, sizeof(int) * N);
  have_targets_ = targets != nullptr;
  if (targets) std::memcpy(targets_.data(), targets, sizeof(int) * N);
  else std::fill_n(targets_.data(), N, -1);
  auto res = [&](int l) { return residual_.data() + size_t(l) * N * C; };  // x_l [N, C]

  const Anatomy anatomy = model_family(c.arch).anatomy();
  // x0 = token embedding (+ learned position)
  const bool learned = anatomy.positions == Positions::Learned;
  encoder_forward(res(0), tokens_.data(), p_.tok_emb, learned ? p_.pos_emb : (const float*)nullptr, B, T, C);
  for (int l = 0; l < L; l++) {
    blocks_->forward_block(l, res(l), res(l + 1), B, T);
    if (ckpt_.recomputed(l)) shared_holds_ = l;  // the shared activation set now holds block l's
  }
  if (anatomy.norm == NormKind::RMSNorm) rmsnorm_forward(xf_.data(), frstd_.data(), res(L), p_.final_norm, N, C, c.norm_eps);
  else layernorm_forward(xf_.data(), fmean_.data(), frstd_.data(), res(L), p_.final_norm, p_.final_norm_b, N, C, c.norm_eps);
  // logits over the real vocabulary (llm.c's padding rows of tok_emb are never used)
  matmul_forward(logits_.data(), xf_.data(), p_.classifier, (const float*)nullptr, N, C, V);

  count_ = crossentropy_forward(losses_.data(), lse_.data(), logits_.data(), targets_.data(), N, V);
  double sum = 0;  // in position order: the same for any thread count
  for (int n = 0; n < N; n++) sum += losses_[size_t(n)];
  loss_ = count_ > 0 ? float(sum / count_) : 0.0f;
  return loss_;
}

void TrainModel::backward(float scale) {
  ORION_CHECK(g_, "backward on a model without gradient buffers");
  ORION_CHECK(have_targets_ && b_ > 0, "backward needs a forward with targets first");
  const ModelConfig& c = p_.config();
  const int B = b_, T = t_, N = B * T, C = c.dim, V = c.vocab_size, L = c.n_layers;
  auto res = [&](int l) { return residual_.data() + size_t(l) * N * C; };
  struct Finish {  // however the backward ends, no gradient is left pending (first_write_zero.h)
    Grads* g;
    ~Finish() { finish_gradients(g->data(), g->size()); }
  } finish{g_};
  if (count_ == 0) return;  // no position carries a loss: every gradient is 0

  // loss = (1/count) Σ_n losses[n], so each counted position's logits get (softmax − onehot)/count.
  float* dlogits = logits_.data();  // written over the logits, which are no longer needed
  crossentropy_backward(dlogits, logits_.data(), lse_.data(), targets_.data(), scale / float(count_), N, V);
  // logits = xf·classifierᵀ  (tied: the gradient lands in tok_emb's rows)
  std::fill(dxf_.begin(), dxf_.begin() + size_t(N) * C, 0.0f);
  // (frozen base: only the input gradient; the classifier's N·C·V weight gradient is skipped)
  matmul_backward(dxf_.data(), frozen_ ? (float*)nullptr : g_->classifier, (float*)nullptr, dlogits, xf_.data(),
                  p_.classifier, N, C, V);
  float* dx = dres_[0].data();  // ∂loss/∂x_L, then walking down the layers
  float* dx_next = dres_[1].data();
  std::fill_n(dx, size_t(N) * C, 0.0f);
  const Anatomy anatomy = model_family(c.arch).anatomy();
  if (anatomy.norm == NormKind::RMSNorm)
    rmsnorm_backward(dx, g_->final_norm, dxf_.data(), res(L), p_.final_norm, frstd_.data(), N, C);
  else
    layernorm_backward(dx, g_->final_norm, g_->final_norm_b, dxf_.data(), res(L), p_.final_norm, fmean_.data(),
                       frstd_.data(), N, C);
  for (int l = L - 1; l >= 0; l--) {
    // Gradient checkpointing: block l kept nothing (or its set was overwritten by a later recomputed
    // block), so run it forward again from its kept input x_l — the same code on the same input, so
    // the activations, and the gradients below, are bit-identical to keeping them.
    if (ckpt_.recomputed(l) && shared_holds_ != l) {
      blocks_->forward_block(l, res(l), recompute_out_.data(), B, T);
      shared_holds_ = l;
    }
    blocks_->backward_block(l, res(l), dx, dx_next, B, T);  // ∂loss/∂x_l from ∂loss/∂x_{l+1}
    std::swap(dx, dx_next);
  }
  const bool learned = anatomy.positions == Positions::Learned;
  if (!frozen_) encoder_backward(g_->tok_emb, learned ? g_->pos_emb : (float*)nullptr, dx, tokens_.data(), B, T, C);
}

void TrainModel::weights_updated() {
  cpu::refresh_weight_packs(p_.data(), p_.size());
  blocks_->weights_updated();
}

void TrainModel::weights_updated(const std::vector<std::pair<const float*, size_t>>& changed) {
  for (const auto& range : changed) cpu::refresh_weight_packs(range.first, range.second);
  cpu::pack_new_weights();  // those the last step's products noted for the first time
  blocks_->weights_updated();
}

}  // namespace orion::train
