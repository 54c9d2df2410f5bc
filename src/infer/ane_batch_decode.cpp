// AneModel::decode_batch: one decode step for several sequences, each an AneModel of its own (its
// own residual stream, KV cache and position), with one evaluation per program for all of them.
//
// Why this works: the decode programs are position-wise — the projections (GPT-2's decode_qkv,
// Llama's decode_qkv, the LoRA decode_qkv kernels), the FFN and the final norm treat every column
// of their [1, C, 1, S] bucket on its own, and the one piece that mixes tokens, attention over the
// cache, is the CPU's (ane_model.h). So the rows of a step are simply the columns of the bucket:
// row b in column b. A single row already runs at S = 16 (or the attention bucket), which
// legalize-ane pads to the C7 minimum anyway (32 columns for C = 768): up to that many rows cost
// one evaluation of the same program, and a batch wider than the bucket compiles the next bucket
// (32, 64, …) once.
//
// Rows with different adapters (adapter_slots > 0): the projections program takes the step's
// distinct adapters stacked (A [slots·r, C], B [out, slots·r]) and a mask that keeps, in each
// column, the rank rows of that row's adapter (lora_decode_qkv_mixed). A base row's column is all
// zeros. On anesim the masked sum adds exact zeros to the row's own terms, in its own order, so
// each row still equals its single-row decode bit for bit.
#include <algorithm>
#include <numeric>
#include <tuple>

#include "base/error.h"
#include "infer/ane_model.h"
#include "model/family/family.h"
#include "model/frontends/frontends.h"
#include "model/frontends/lora_frontends.h"
#include "model/frontends/program_set.h"
#include "runtime/ane_layout.h"
#include "runtime/cpu/kernels.h"

namespace orion {
namespace {

using runtime::ane_to_rows;
using runtime::rows_to_ane;
using runtime::TensorMap;

// y [M, N] = x [M, K]·Wᵀ in blocks of fewer rows than the library GEMM takes: below that every row
// sums in the decode matvec's order, so each row equals its own 1-row product (runtime/cpu/kernels.h).
void matmul_as_rows(float* y, const float* x, const Tensor& W, int M, int K, int N) {
  constexpr int kBlock = cpu::kLibraryGemmMinRows - 1;
  for (int m0 = 0; m0 < M; m0 += kBlock)
    cpu::matmul(y + size_t(m0) * N, x + size_t(m0) * K, W.data, W.dtype, nullptr, std::min(kBlock, M - m0), K, N);
}

}  // namespace

int AneModel::batch_bucket(int single_bucket, int rows) const {
  return frontends::decode_batch_bucket(single_bucket, rows, cache_.driver().chip());
}

// q [B, Q], k, v [B, KV] of the rows x [B, C]: one evaluation of the batch projections kernel, or
// one per adapter_slots distinct adapters when the rows mix more than that.
void AneModel::batch_projections(const std::vector<AneModel*>& m, int l, int adapter_slots, const float* x, float* q,
                                 float* k, float* v) {
  AneModel& a = *m.front();
  const frontends::KernelSpec kernel = frontends::decode_batch_projections(a.w_.config.arch, a.lora_slot_, adapter_slots);
  if (a.lora_slot_ > 0 && adapter_slots > 0) return project_mixed_adapters(m, l, kernel, adapter_slots, x, q, k, v);
  for (const AneModel* r : m)  // one set of adapter inputs (or none) serves every row: rows[0]'s
    ORION_CHECK(r->lora_adapter_ == a.lora_adapter_ && r->lora_scale_mult_ == a.lora_scale_mult_,
                "the rows of a decode batch without adapter slots must hold the same adapter");
  std::vector<size_t> all(m.size());
  std::iota(all.begin(), all.end(), size_t(0));
  const TensorMap extra = a.lora_slot_ > 0 ? a.lora_inputs_[size_t(l)] : TensorMap{};
  project_columns(m, l, kernel, a.batch_bucket(a.decode_qkv_bucket(), int(m.size())), all, extra, x, q, k, v);
}

// The step's distinct adapters in order of first appearance (by the first row holding each), each
// row's index among them (−1: base); evaluation e takes adapters e·slots .. (e+1)·slots − 1, and
// the base rows join the first.
void AneModel::project_mixed_adapters(const std::vector<AneModel*>& m, int l, const frontends::KernelSpec& kernel,
                                      int adapter_slots, const float* x, float* q, float* k, float* v) {
  AneModel& a = *m.front();
  std::vector<const AneModel*> owners;
  std::vector<int> of_row;
  for (const AneModel* r : m) {
    auto same = [&](const AneModel* o) {
      return o->lora_adapter_ == r->lora_adapter_ && o->lora_scale_mult_ == r->lora_scale_mult_;
    };
    int i = -1;
    if (r->lora_adapter_) {
      i = int(std::find_if(owners.begin(), owners.end(), same) - owners.begin());
      if (i == int(owners.size())) owners.push_back(r);
    }
    of_row.push_back(i);
  }
  const int evaluations = std::max(1, (int(owners.size()) + adapter_slots - 1) / adapter_slots);
  for (int e = 0; e < evaluations; e++) {
    const int first = e * adapter_slots, last = std::min(first + adapter_slots, int(owners.size()));
    std::vector<size_t> cols;
    std::vector<int> column_adapter;
    for (size_t b = 0; b < m.size(); b++)
      if (const int i = of_row[b]; (i < 0 && e == 0) || (i >= first && i < last))
        cols.push_back(b), column_adapter.push_back(i < 0 ? -1 : i - first);
    std::vector<const TensorMap*> adapters;
    for (int i = first; i < last; i++) adapters.push_back(&owners[size_t(i)]->lora_inputs_[size_t(l)]);
    const int S = a.batch_bucket(a.decode_qkv_bucket(), int(cols.size()));
    TensorMap extra = frontends::lora_mixed_inputs(a.w_.config, a.lora_slot_, adapter_slots, adapters, column_adapter, S);
    project_columns(m, l, kernel, S, cols, std::move(extra), x, q, k, v);
  }
}

void AneModel::project_columns(const std::vector<AneModel*>& m, int l, const frontends::KernelSpec& kernel, int S,
                               const std::vector<size_t>& cols, TensorMap extra, const float* x, float* q, float* k,
                               float* v) {
  AneModel& a = *m.front();
  const int n = int(cols.size()), C = a.w_.config.dim, Q = int(a.q_.size()), KV = a.kv_dim_;
  std::vector<float> xs(size_t(n) * C), out(size_t(n) * std::max(Q, KV));
  for (int j = 0; j < n; j++) std::copy_n(x + cols[size_t(j)] * C, C, xs.begin() + std::ptrdiff_t(j) * C);
  extra["x"] = rows_to_ane(xs.data(), n, C, S);
  const TensorMap p = a.program(kernel, l, S)->run(std::move(extra));
  for (auto [name, to, width] : {std::tuple{"q", q, Q}, std::tuple{"k", k, KV}, std::tuple{"v", v, KV}}) {
    ane_to_rows(p.at(name), n, out.data());
    for (int j = 0; j < n; j++)
      std::copy_n(out.begin() + std::ptrdiff_t(j) * width, width, to + cols[size_t(j)] * size_t(width));
  }
}

namespace {
// Per row, on the CPU: k, v into the row's cache at its position, att [B, Q] over that cache.
struct RowAttention {
  std::vector<float> q, k, v, att;
  RowAttention(size_t B, size_t Q, size_t KV) : q(B * Q), k(B * KV), v(B * KV), att(B * Q) {}
};
}  // namespace

// The decode layer of GPT-2's inference kernels (decode_layer_inference_kernels) for B rows.
void AneModel::batch_layer_inference_kernels(const std::vector<AneModel*>& m, int l, int adapter_slots, const int* pos,
                                             float* x) {
  AneModel& a = *m.front();
  const size_t B = m.size(), C = size_t(a.w_.config.dim), Q = a.q_.size(), KV = size_t(a.kv_dim_);
  RowAttention r(B, Q, KV);
  batch_projections(m, l, adapter_slots, x, r.q.data(), r.k.data(), r.v.data());
  for (size_t b = 0; b < B; b++) m[b]->attend_row(l, pos[b], &r.q[b * Q], &r.k[b * KV], &r.v[b * KV], &r.att[b * Q]);
  const int S = a.batch_bucket(frontends::kDecodeBucket, int(B));
  TensorMap f = a.program(frontends::kDecodeFfn, l, S)
                    ->run({{"x", rows_to_ane(x, int(B), int(C), S)}, {"att", rows_to_ane(r.att.data(), int(B), int(C), S)}});
  ane_to_rows(f.at("y"), int(B), x);
}

// The decode layer of the training kernels (decode_layer_training_kernels) for B rows.
void AneModel::batch_layer_training_kernels(const std::vector<AneModel*>& m, int l, int adapter_slots, const int* pos,
                                            float* x) {
  AneModel& a = *m.front();
  const LayerWeights& lw = a.w_.layers[size_t(l)];
  const size_t B = m.size(), C = size_t(a.w_.config.dim), Q = a.q_.size(), KV = size_t(a.kv_dim_);
  RowAttention r(B, Q, KV);
  batch_projections(m, l, adapter_slots, x, r.q.data(), r.k.data(), r.v.data());
  for (size_t b = 0; b < B; b++) m[b]->attend_row(l, pos[b], &r.q[b * Q], &r.k[b * KV], &r.v[b * KV], &r.att[b * Q]);
  std::vector<float> o(B * C);
  matmul_as_rows(o.data(), r.att.data(), lw.wo, int(B), int(Q), int(C));  // Wo·att of every row
  cpu::add_inplace(x, o.data(), B * C);                                   // h = x + Wo·att
  const int S = a.batch_bucket(frontends::kDecodeBucket, int(B));
  TensorMap f = a.program(frontends::kDecodeFfn, l, S)->run({{"x", rows_to_ane(x, int(B), int(C), S)}});
  ane_to_rows(f.at("y"), int(B), x, /*accumulate=*/true);
}

void AneModel::attend_row(int l, int pos, const float* q, const float* k, const float* v, float* att) {
  std::copy(q, q + q_.size(), q_.begin());
  std::copy(k, k + kv_dim_, k_cache(l, pos));
  std::copy(v, v + kv_dim_, v_cache(l, pos));
  attend(l, pos);
  std::copy(att_.begin(), att_.end(), att);
}

void AneModel::decode_batch(const std::vector<AneModel*>& m, const int* tokens, const int* pos, float* logits,
                            int adapter_slots) {
  ORION_CHECK(!m.empty(), "a decode batch needs at least one row");
  AneModel& a = *m.front();
  for (const AneModel* r : m)
    ORION_CHECK(&r->w_ == &a.w_ && &r->cache_ == &a.cache_ && r->lora_slot_ == a.lora_slot_ &&
                    r->opt_.model_name == a.opt_.model_name && r->opt_.weights_version == a.opt_.weights_version,
                "the rows of a decode batch must share the weights, the program cache and the adapter slot");
  const ModelConfig& c = a.w_.config;
  const size_t B = m.size(), C = size_t(c.dim);
  std::vector<float> x(B * C);  // [B, C]: row b is m[b]'s token
  for (size_t b = 0; b < B; b++) {
    m[b]->check_tokens(tokens + b, 1, pos[b]);
    m[b]->embed(tokens + b, 1, pos[b]);
    std::copy(m[b]->x_.begin(), m[b]->x_.end(), x.begin() + std::ptrdiff_t(b * C));
  }
  for (int l = 0; l < c.n_layers; l++) {
    if (model_family(c.arch).ane_inference_kernels()) batch_layer_inference_kernels(m, l, adapter_slots, pos, x.data());
    else batch_layer_training_kernels(m, l, adapter_slots, pos, x.data());
  }
  // ANE: the final norm of every row; CPU: the classifier (C12), every row in one product.
  const int S = a.batch_bucket(frontends::kDecodeBucket, int(B));
  TensorMap y = a.program(frontends::kFinalNorm, -1, S)->run({{"x", rows_to_ane(x.data(), int(B), int(C), S)}});
  ane_to_rows(y.at("y"), int(B), x.data());
  matmul_as_rows(logits, x.data(), a.w_.classifier, int(B), int(C), c.vocab_size);
}

}  // namespace orion
