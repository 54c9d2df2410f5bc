// AneModel::decode_batch: one decode step for several sequences, each an AneModel of its own (its
// own residual stream, KV cache and position), with one evaluation per program for all of them.
//
// Why this works without new kernels: the decode programs are position-wise — the projections
// (GPT-2's decode_qkv, lora_decode_qkv), the FFN and the final norm treat every column of their
// [1, C, 1, S] bucket on its own, and the one piece that mixes tokens, attention over the cache,
// is the CPU's (ane_model.h). So the rows of a step are simply the columns of the bucket: row b in
// column b. A single row already runs at S = 16 (or the attention bucket), which legalize-ane pads
// to the C7 minimum anyway (32 columns for C = 768): up to that many rows cost one evaluation of
// the same program, and a batch wider than the bucket compiles the next bucket (32, 64, …) once.
// Llama without an adapter slot projects with fwd_attn, which attends across its columns: those
// projections run row by row, the FFN and final norm still batched.
#include <algorithm>

#include "base/error.h"
#include "infer/ane_model.h"
#include "model/family/family.h"
#include "model/frontends/frontends.h"
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

// q [B, Q], k, v [B, KV] of the rows x [B, C]: one evaluation, or one per row where the kernel
// attends across columns.
void AneModel::batch_projections(const std::vector<AneModel*>& m, int l, float* x, float* q, float* k, float* v) {
  AneModel& a = *m.front();
  const int B = int(m.size()), C = a.w_.config.dim, Q = int(a.q_.size()), KV = a.kv_dim_;
  const int per_evaluation = frontends::decode_projections_positionwise(a.w_.config.arch, a.lora_slot_) ? B : 1;
  for (int b0 = 0; b0 < B; b0 += per_evaluation) {
    const int n = std::min(per_evaluation, B - b0), S = a.batch_bucket(a.decode_qkv_bucket(), n);
    TensorMap p = a.program(frontends::kDecodeAttn, l, S)
                      ->run(a.with_lora(l, {{"x", rows_to_ane(x + size_t(b0) * C, n, C, S)}}));
    ane_to_rows(p.at("q"), n, q + size_t(b0) * Q);
    ane_to_rows(p.at("k"), n, k + size_t(b0) * KV);
    ane_to_rows(p.at("v"), n, v + size_t(b0) * KV);
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
void AneModel::batch_layer_inference_kernels(const std::vector<AneModel*>& m, int l, const int* pos, float* x) {
  AneModel& a = *m.front();
  const size_t B = m.size(), C = size_t(a.w_.config.dim), Q = a.q_.size(), KV = size_t(a.kv_dim_);
  RowAttention r(B, Q, KV);
  batch_projections(m, l, x, r.q.data(), r.k.data(), r.v.data());
  for (size_t b = 0; b < B; b++) m[b]->attend_row(l, pos[b], &r.q[b * Q], &r.k[b * KV], &r.v[b * KV], &r.att[b * Q]);
  const int S = a.batch_bucket(frontends::kDecodeBucket, int(B));
  TensorMap f = a.program(frontends::kDecodeFfn, l, S)
                    ->run({{"x", rows_to_ane(x, int(B), int(C), S)}, {"att", rows_to_ane(r.att.data(), int(B), int(C), S)}});
  ane_to_rows(f.at("y"), int(B), x);
}

// The decode layer of the training kernels (decode_layer_training_kernels) for B rows.
void AneModel::batch_layer_training_kernels(const std::vector<AneModel*>& m, int l, const int* pos, float* x) {
  AneModel& a = *m.front();
  const LayerWeights& lw = a.w_.layers[size_t(l)];
  const size_t B = m.size(), C = size_t(a.w_.config.dim), Q = a.q_.size(), KV = size_t(a.kv_dim_);
  RowAttention r(B, Q, KV);
  batch_projections(m, l, x, r.q.data(), r.k.data(), r.v.data());
  for (size_t b = 0; b < B; b++) m[b]->attend_row(l, pos[b], &r.q[b * Q], &r.k[b * KV], &r.v[b * KV], &r.att[b * Q]);
  std::vector<float> o(B * C);
  matmul_as_rows(o.data(), r.att.data(), lw.wo, int(B), int(Q), int(C));  // Wo·att of every row
  cpu::add_inplace(x, o.data(), B * C);  // h = x + Wo·att
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

void AneModel::decode_batch(const std::vector<AneModel*>& m, const int* tokens, const int* pos, float* logits) {
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
    if (model_family(c.arch).ane_inference_kernels()) batch_layer_inference_kernels(m, l, pos, x.data());
    else batch_layer_training_kernels(m, l, pos, x.data());
  }
  // ANE: the final norm of every row; CPU: the classifier (C12), every row in one product.
  const int S = a.batch_bucket(frontends::kDecodeBucket, int(B));
  TensorMap y = a.program(frontends::kFinalNorm, -1, S)->run({{"x", rows_to_ane(x.data(), int(B), int(C), S)}});
  ane_to_rows(y.at("y"), int(B), x.data());
  matmul_as_rows(logits, x.data(), a.w_.classifier, int(B), int(C), c.vocab_size);
}

}  // namespace orion
