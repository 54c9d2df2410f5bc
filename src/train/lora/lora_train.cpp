// LoRA fine-tuning: the exact adapter gradient, directly or from the merged weight's (lora_train.h).
#include "train/lora/lora_train.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/file.h"
#include "base/timer.h"
#include "data/prepare.h"
#include "data/token_dataset.h"
#include "model/io/model_io.h"
#include "model/lora/lora_io.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_kernels.h"
#include "train/loop/checkpoint.h"
#include "train/dist/communicator.h"
#include "train/dist/data_parallel.h"
#include "train/model/guards.h"

namespace orion::train {
namespace fs = std::filesystem;

// --- the adapter over the working parameters -----------------------------------------------------

float* LoraTraining::work_matrix(const LoraTensor& t) { return lora_target_member(work_.layers[size_t(t.layer)], t.target); }
const float* LoraTraining::grad_matrix(const Grads& g, const LoraTensor& t) const {
  return lora_target_member(g.layers[size_t(t.layer)], t.target);
}

LoraTraining::LoraTraining(Params& work, LoraAdapter adapter, bool merged)
    : work_(work), adapter_(std::move(adapter)), merged_(merged) {
  adapter_.check_fits(work.config(), "adapter");
  if (merged_)
    for (const LoraTensor& t : adapter_.tensors()) {
      const float* W = work_matrix(t);
      base_.emplace_back(W, W + t.out * t.in);
    }
  grads_.assign(adapter_.size(), 0.0f);
  merge_into_work();
}

const float* LoraTraining::base_matrix(size_t i) const {
  const LoraTensor& t = adapter_.tensors().at(i);
  return merged_ ? base_[i].data() : lora_target_member(work_.layers[size_t(t.layer)], t.target);
}

void LoraTraining::projection(int layer, LoraTarget target, const float* x, const float* dy, int N) {
  const LoraTensor* t = adapter_.find(layer, target);
  ORION_CHECK(t, "layer {} {} has no adapter", layer, lora_target_name(target));
  const int r = adapter_.rank(), in = int(t->in), out = int(t->out);
  const float s = adapter_.scale();
  u_.resize(size_t(N) * r), v_.resize(size_t(N) * r);
  // u = s·X·Aᵀ [N, r] (cpu::matmul: y [M, N] = x [M, K]·Wᵀ, W [N, K]); dB [out, r] += dYᵀ·u
  cpu::matmul(u_.data(), x, adapter_.A(*t), DType::F32, nullptr, N, in, r);
  for (float& e : u_) e *= s;
  cpu::matmul_backward_weight(grads_.data() + t->b_offset, dy, u_.data(), N, r, out);
  // v = s·dY·B [N, r] (dx [M, K] += dy [M, N]·W [N, K] with W = B [out, r]); dA [r, in] += vᵀ·X
  std::fill(v_.begin(), v_.end(), 0.0f);
  cpu::matmul_backward_input(v_.data(), dy, adapter_.B(*t), N, r, out);
  for (float& e : v_) e *= s;
  cpu::matmul_backward_weight(grads_.data() + t->a_offset, v_.data(), x, N, in, r);
}

std::vector<std::pair<size_t, size_t>> LoraTraining::layout() const {
  std::vector<std::pair<size_t, size_t>> l;
  for (const LoraTensor& t : adapter_.tensors()) {
    l.emplace_back(t.a_offset, size_t(adapter_.rank()) * size_t(t.in));
    l.emplace_back(t.b_offset, size_t(t.out) * size_t(adapter_.rank()));
  }
  return l;
}

void LoraTraining::merge_into_work() {
  if (!merged_) return;
  for (size_t i = 0; i < adapter_.tensors().size(); i++) {
    const LoraTensor& t = adapter_.tensors()[i];
    lora_merge_matrix(work_matrix(t), base_[i].data(), adapter_.A(t), adapter_.B(t), t.out, t.in, adapter_.rank(),
                      adapter_.scale());
  }
}

std::vector<std::pair<const float*, size_t>> LoraTraining::merged_matrices() {
  std::vector<std::pair<const float*, size_t>> m;
  if (merged_)
    for (const LoraTensor& t : adapter_.tensors()) m.emplace_back(work_matrix(t), t.out * t.in);
  return m;
}

void LoraTraining::gather(const Grads& g) {
  const int r = adapter_.rank();
  const float s = adapter_.scale();
  for (const LoraTensor& t : adapter_.tensors()) {
    const float* G = grad_matrix(g, t);  // dW' [out, in]
    const float* A = adapter_.A(t);      // [r, in]
    const float* B = adapter_.B(t);      // [out, r]
    float* dA = grads_.data() + t.a_offset;
    float* dB = grads_.data() + t.b_offset;
    // dB = s·dW'·Aᵀ: matmul computes y [M, N] = x [M, K]·Wᵀ with W [N, K] — here x = dW', W = A.
    cpu::matmul(dB, G, A, DType::F32, nullptr, int(t.out), int(t.in), r);
    for (int64_t i = 0; i < t.out * r; i++) dB[i] *= s;
      // dA = s·Bᵀ·dW': row k of dA is s·Σ_o B[o, k]·dW'[o, :] (rows of dA are independent).
#pragma omp parallel for schedule(static) if (t.out * t.in * r > (1 << 18))
    for (int k = 0; k < r; k++) {
      float* row = dA + int64_t(k) * t.in;
      std::fill(row, row + t.in, 0.0f);
      for (int64_t o = 0; o < t.out; o++) {
        const float coef = s * B[o * r + k];
        if (coef == 0.0f) continue;
        const float* gr = G + o * t.in;
        for (int64_t i = 0; i < t.in; i++) row[i] += coef * gr[i];
      }
    }
  }
}

}  // namespace orion::train
