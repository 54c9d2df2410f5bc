// A batched decode step's blocks in ONE OpenMP parallel region (BatchedDecoder::decode_layers_together).
//
// decode_block (batched_decode.cpp) runs a layer as the family blocks do: a parallel region for each
// of its 7 products and for the attention, and the norms, RoPE, cache writes, SwiGLU and adds on the
// calling thread. With 8 rows on the Zen 5 VM those serial parts took ~90 of a layer's ~870 µs (a
// norm of several rows opens a region of its own; the adds read rows the other core just wrote).
// Here the team starts once per step and meets at 6 barriers per layer, as decode_step does for one
// token (bench/RESULTS.md: 8 q8_0 streams of Stories110M ~8% faster, 2 streams ~15%):
//
//   each thread:  xn = norm(x)                        (its own copy: B·C values, cheaper than a barrier)
//   split rows:   q, k, v = xn·[wq; wk; wv]ᵀ (+ biases)  — one row space, taken with work stealing
//   split rows b: q/k norms, RoPE at row b's position, k and v into row b's slot cache
//   split tasks:  attention of every (row, kv head), as attention_rows
//   split rows:   x[:, r] += (att·woᵀ + bo)[:, r]
//   each thread:  xn = norm(x)
//   split rows:   SwiGLU hb[:, j] = silu((xn·w1ᵀ)[:, j]) · (xn·w3ᵀ)[:, j]  |  GELU hb[:, j] = gelu((xn·w1ᵀ + b1)[:, j])
//   split rows:   x[:, r] += (hb·w2ᵀ + b2)[:, r]
// (a barrier after each split phase). Every element is computed by one thread with the kernels
// decode_block uses (few_token_rows are matmul's few-token products), so the logits are the same
// bits as decode_block's, and as each sequence's own decode step — whatever the number of threads.
// Rows with a LoRA adapter and steps of more than kFewTokens rows take decode_block.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "infer/batched_decode.h"
#include "model/family/family.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/work_shares.h"

namespace orion {
namespace {

constexpr int kStepUnits = 2;  // units a thread takes from the front of its own run at a time

const float* bias_of(const Tensor* b) { return !b || b->empty() ? nullptr : b->f32(); }

// The rows of one product [B, K] as the calling thread feeds them to matrices: made ready
// (cpu::prepare_few_tokens) for the dtype of the matrix it meets, again only when that changes.
struct Tokens {
  cpu::FewTokenInput in;
  Tokens(const float* x, int B, int K) : in{x, B, K, DType::F32} {}
  const cpu::FewTokenInput& for_matrix(const Tensor& W) {
    if (in.wt != W.dtype) in = cpu::prepare_few_tokens(in.x, in.M, in.K, W.dtype);
    return in;
  }
};

// One matrix W [N, K] of a shared row space, written to y [B, N].
struct Segment {
  const Tensor* W;
  const Tensor* bias;  // nullptr or empty: none
  float* y;
  int N;
};

// The calling thread's takes of a row space made of `segs` (each segment starts on a whole unit of
// few_token_rows_unit() rows): for each row range [r0, r1) of segment s it takes, y rows of all B
// tokens, then after(s, r0, r1).
template <size_t S, typename After>
void products(cpu::WorkShares& units, const Segment (&segs)[S], Tokens& in, After after) {
  const int unit = cpu::few_token_rows_unit();
  int u0, u1;
  while (units.next(kStepUnits, &u0, &u1)) {
    int first = 0;  // the segment's first unit
    for (size_t s = 0; s < S; s++) {
      const int n = (segs[s].N + unit - 1) / unit;
      const int a = std::max(u0, first) - first, b = std::min(u1, first + n) - first;
      if (a < b) {
        const int r0 = a * unit, r1 = std::min(segs[s].N, b * unit);
        cpu::few_token_rows(segs[s].y, in.for_matrix(*segs[s].W), segs[s].W->data, bias_of(segs[s].bias), segs[s].N, r0, r1);
        after(s, r0, r1);
      }
      first += n;
    }
  }
}

// x[:, r] += (in·Wᵀ + bias)[:, r] for the rows r the calling thread takes from `units`; tmp [B, C]
// holds the products.   in: [B, K], W: [C, K], x: [B, C]
void add_product_rows(cpu::WorkShares& units, float* x, float* tmp, const float* in, const Tensor& W, const Tensor& bias,
                      int B, int K) {
  const int C = int(W.shape[0]);
  Tokens tokens(in, B, K);
  const Segment w[1] = {{&W, &bias, tmp, C}};
  products(units, w, tokens, [&](size_t, int r0, int r1) {
    for (int b = 0; b < B; b++) cpu::add_inplace(x + size_t(b) * C + r0, tmp + size_t(b) * C + r0, size_t(r1 - r0));
  });
}

// y[b] = norm(x[b]) for b < B, row by row (rmsnorm/layernorm of several rows would open a region).
void normalise_rows(const Anatomy& an, float* y, const float* x, const Tensor& g, const Tensor& bias, int B, int C,
                    float eps) {
  for (int b = 0; b < B; b++) normalise_row(an, y + size_t(b) * C, x + size_t(b) * C, g, bias, C, eps);
}

}  // namespace

void BatchedDecoder::decode_layers_together(const std::vector<Row>& rows) {
  const ModelConfig& c = w_.config;
  const Anatomy an = model_family(c.arch).anatomy();
  const int B = int(rows.size()), C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS, KV = kv_dim_, H = c.hidden_dim;
  const bool rope = an.positions == Positions::Rope;
  float* x = a_.x.data();
  // RoPE cos/sin at each row's position: the same for every layer.
  std::vector<float> cs(rope ? size_t(B) * HS : 0);
  if (rope)
    for (int b = 0; b < B; b++) cpu::rope_angles(cs.data() + size_t(b) * HS, rope_freq_.data(), HS, rows[size_t(b)].pos);

  // Each phase's units as the threads take them: per layer the q/k/v rows, wo's, w1(/w3)'s and w2's.
  enum { kQkv, kWo, kW13, kW2, kPhases };
  std::vector<cpu::WorkShares> shares(size_t(kPhases * layers_));
  std::vector<cpu::AttentionRow> att(rows.size());
#pragma omp parallel
  {
#pragma omp single
    {
      const int nt = omp_get_num_threads(), unit = cpu::few_token_rows_unit();
      const int qkv_units = (Q + unit - 1) / unit + 2 * ((KV + unit - 1) / unit);
      for (int l = 0; l < layers_; l++) {
        cpu::WorkShares* s = &shares[size_t(kPhases * l)];
        s[kQkv].reset(qkv_units, 1, nt);
        s[kWo].reset((C + unit - 1) / unit, 1, nt);
        s[kW13].reset((H + unit - 1) / unit, 1, nt);
        s[kW2].reset((C + unit - 1) / unit, 1, nt);
      }
    }                                      // (implicit barrier)
    std::vector<float> xn(size_t(B) * C);  // this thread's normalised copy of x
    for (int l = 0; l < layers_; l++) {
      const LayerWeights& lw = w_.layers[size_t(l)];
      cpu::WorkShares* phase = &shares[size_t(kPhases * l)];

      // --- attention ---
      normalise_rows(an, xn.data(), x, lw.attn_norm, lw.attn_norm_b, B, C, c.norm_eps);
      {
        Tokens in(xn.data(), B, C);
        const Segment qkv[3] = {{&lw.wq, &lw.bq, a_.q.data(), Q},
                                {&lw.wk, &lw.bk, a_.k.data(), KV},
                                {&lw.wv, &lw.bv, a_.v.data(), KV}};
        products(phase[kQkv], qkv, in, [](size_t, int, int) {});
      }
#pragma omp barrier
#pragma omp for schedule(static)
      for (int b = 0; b < B; b++) {  // row b: q/k norms, RoPE, then its key and value into its slot's cache
        const Row& r = rows[size_t(b)];
        float* qb = a_.q.data() + size_t(b) * Q;
        float* kb = a_.k.data() + size_t(b) * KV;
        if (!lw.q_norm.empty()) {
          for (int h = 0; h < c.n_heads; h++) cpu::rmsnorm(qb + h * HS, qb + h * HS, lw.q_norm.f32(), 1, HS, c.norm_eps);
          for (int h = 0; h < c.n_kv_heads; h++) cpu::rmsnorm(kb + h * HS, kb + h * HS, lw.k_norm.f32(), 1, HS, c.norm_eps);
        }
        if (rope) {
          cpu::rope_rotate(qb, cs.data() + size_t(b) * HS, HS, 0, Q);
          cpu::rope_rotate(kb, cs.data() + size_t(b) * HS, HS, 0, KV);
        }
        KvCache& cache = caches_[size_t(r.slot)];
        cache.store_rows(l, r.pos, kb, a_.v.data() + size_t(b) * KV, 1);
        att[size_t(b)] = {a_.att.data() + size_t(b) * Q, qb, cache.k(l), cache.v(l), r.pos};
      }  // (implicit barrier: every row's key and value are in place before any row attends)
      cpu::attention_rows_in_team(att.data(), B, c.n_heads, c.n_kv_heads, caches_[0].layout(), c.sliding_window);
#pragma omp barrier
      add_product_rows(phase[kWo], x, a_.xb.data(), a_.att.data(), lw.wo, lw.bo, B, Q);
#pragma omp barrier

      // --- feed-forward ---
      normalise_rows(an, xn.data(), x, lw.ffn_norm, lw.ffn_norm_b, B, C, c.norm_eps);
      {
        Tokens in(xn.data(), B, C);
        const Segment w1[1] = {{&lw.w1, &lw.b1, a_.hb.data(), H}};
        products(phase[kW13], w1, in, [&](size_t, int j0, int j1) {
          if (an.gated_ffn) {  // the same rows of w3 (no bias), then SwiGLU on them
            cpu::few_token_rows(a_.hb2.data(), in.for_matrix(lw.w3), lw.w3.data, nullptr, H, j0, j1);
            for (int b = 0; b < B; b++) {
              float* h = a_.hb.data() + size_t(b) * H + j0;
              cpu::swiglu(h, h, a_.hb2.data() + size_t(b) * H + j0, size_t(j1 - j0));
            }
          } else {
            for (int b = 0; b < B; b++) cpu::gelu_tanh_inplace(a_.hb.data() + size_t(b) * H + j0, size_t(j1 - j0));
          }
        });
      }
#pragma omp barrier
      add_product_rows(phase[kW2], x, a_.xb.data(), a_.hb.data(), lw.w2, lw.b2, B, H);
#pragma omp barrier
    }
  }
}

}  // namespace orion
