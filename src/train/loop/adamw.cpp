#include "train/loop/adamw.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "runtime/cpu/bf16_weight_packs.h"
#include "runtime/cpu/train_kernels.h"
#include "train/cpu/first_write_zero.h"

namespace orion::train {
namespace {
constexpr size_t kChunk = 1 << 14;  // elements per task: the unit of both parallel loops

// The buffer cut into chunks of ≤ kChunk elements that never straddle two tensors; `decay`
// selects λ for each tensor.
template <typename Fn>
void for_each_chunk(const Params& p, Fn&& fn) {
  for (const ParamInfo& t : p.tensors())
    for (size_t b = t.offset; b < t.offset + t.numel; b += kChunk) fn(t, b, std::min(t.offset + t.numel, b + kChunk));
}

// Σ g² per chunk in double, then the chunks in order: a thread-count-independent sum.
double sum_squares(const float* g, const std::vector<std::pair<size_t, size_t>>& ranges) {
  std::vector<double> part(ranges.size());
  const bool simd = cpu::train_simd_available();
#pragma omp parallel for schedule(static) if (ranges.size() > 4)
  for (size_t c = 0; c < ranges.size(); c++) {
    const size_t b = ranges[c].first, e = ranges[c].second;
    if (simd) {  // the same sums, 8 lanes at a time (bit-identical; AVX-512 or AVX2)
      part[c] = cpu::sum_squares_simd(g + b, e - b);
      continue;
    }
    // 8 running sums (lane j takes i ≡ j mod 8) so the adds do not wait on each other and vectorise;
    // then the lanes and the tail in a fixed order.
    double lane[8] = {};
    size_t i = b;
    for (; i + 8 <= e; i += 8)
      for (int j = 0; j < 8; j++) lane[j] += double(g[i + j]) * g[i + j];
    double s = 0;
    for (double x : lane) s += x;
    for (; i < e; i++) s += double(g[i]) * g[i];
    part[c] = s;
  }
  double s = 0;
  for (double x : part) s += x;
  return s;
}
}  // namespace

double grad_norm(const Grads& grads) {
  std::vector<std::pair<size_t, size_t>> ranges;
  for_each_chunk(grads, [&](const ParamInfo&, size_t b, size_t e) { ranges.emplace_back(b, e); });
  return std::sqrt(sum_squares(grads.data(), ranges));
}

AdamW::AdamW(const Params& layout, AdamWConfig config) : cfg_(config) {
  for_each_chunk(layout, [&](const ParamInfo& t, size_t b, size_t e) {
    chunks_.push_back({b, e, t.matrix() || cfg_.decay_vectors ? cfg_.weight_decay : 0.0f});
  });
  // The update is elementwise, so it may cut the buffer differently from the norm (whose chunks fix
  // its summation order): a matrix in whole blocks of 16 rows, which a kept bf16 weight pack can
  // take right after their update, still in cache (cpu::repack_updated_rows).
  for (const ParamInfo& t : layout.tensors()) {
    const float decay = t.matrix() || cfg_.decay_vectors ? cfg_.weight_decay : 0.0f;
    const size_t cols = t.matrix() ? size_t(t.shape[1]) : 0;
    const size_t len = cols ? std::max<size_t>(16, kChunk / cols / 16 * 16) * cols : kChunk;
    for (size_t b = t.offset; b < t.offset + t.numel; b += len) update_chunks_.push_back({b, std::min(t.offset + t.numel, b + len), decay});
  }
  assign_on_huge_pages(m_, layout.size(), 0.0f);  // streamed every step: 2 MB pages
  assign_on_huge_pages(v_, layout.size(), 0.0f);
}

AdamW::AdamW(const std::vector<std::pair<size_t, size_t>>& tensors, size_t size, AdamWConfig config) : cfg_(config) {
  for (auto [offset, numel] : tensors)
    for (size_t b = offset; b < offset + numel; b += kChunk)
      chunks_.push_back({b, std::min(offset + numel, b + kChunk), cfg_.weight_decay});
  update_chunks_ = chunks_;
  assign_on_huge_pages(m_, size, 0.0f);
  assign_on_huge_pages(v_, size, 0.0f);
}

double AdamW::norm(const float* grads) const {
  ORION_CHECK(!gradients_pending(), "AdamW: gradients read while a zero_grad is pending (no backward since it)");
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const Chunk& c : chunks_) ranges.emplace_back(c.begin, c.end);
  return std::sqrt(sum_squares(grads, ranges));
}

float AdamW::step(Params& params, const Grads& grads, float lr, double known_norm) {
  ORION_CHECK(params.size() == m_.size() && grads.size() == m_.size(), "AdamW: buffers of different layouts");
  return step(params.data(), grads.data(), lr, known_norm);
}

float AdamW::step(float* params, const float* grads, float lr, double known_norm) {
  ORION_CHECK(!gradients_pending(), "AdamW: gradients read while a zero_grad is pending (no backward since it)");
  const double norm = known_norm >= 0 ? known_norm : this->norm(grads);
  // Clipping scales the whole gradient so its norm is at most clip_norm (direction unchanged).
  const float gscale = cfg_.clip_norm > 0 && norm > cfg_.clip_norm ? float(cfg_.clip_norm / norm) : 1.0f;
  t_++;
  const float b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps;
  const float c1 = 1.0f - std::pow(b1, float(t_)), c2 = 1.0f - std::pow(b2, float(t_));  // bias corrections
  float* __restrict p = params;
  const float* __restrict g = grads;
  float* __restrict m = m_.data();
  float* __restrict v = v_.data();
  const bool simd = cpu::train_simd_available(), repack = cpu::weight_packs_active();
  // Chunks taken as threads free up: they hold 12 K to 49 K elements (16 rows of a matrix), so equal
  // counts per thread are not equal work (GPT-2 124M: ~10% more for one thread, statically split).
#pragma omp parallel for schedule(dynamic, 4) if (update_chunks_.size() > 4)
  for (size_t c = 0; c < update_chunks_.size(); c++) {
    const Chunk ch = update_chunks_[c];
    if (simd) {  // the same operations 16 or 8 at a time (bit-identical), one pass over p, g, m, v
      cpu::adamw_update_simd(p + ch.begin, g + ch.begin, m + ch.begin, v + ch.begin, ch.end - ch.begin,
                             {gscale, b1, b2, c1, c2, eps, lr, ch.decay});
      if (repack) cpu::repack_updated_rows(p + ch.begin, ch.end - ch.begin);
      continue;
    }
#pragma omp simd
    for (size_t i = ch.begin; i < ch.end; i++) {
      const float gi = g[i] * gscale;
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      const float mhat = m[i] / c1, vhat = v[i] / c2;
      p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + ch.decay * p[i]);
    }
    if (repack) cpu::repack_updated_rows(p + ch.begin, ch.end - ch.begin);
  }
  return float(norm);
}

}  // namespace orion::train
