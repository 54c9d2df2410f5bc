// A Llama decode step: one token through every block, the final norm and the classifier inside ONE
// OpenMP parallel region.
//
// Decode is memory-bound: each weight is read once for 2 flops, so a token costs the bytes of the
// weights over the memory bandwidth — plus the time threads spend starting and waiting for each
// other. llama_block_forward starts a parallel region for every matrix product (8 per layer); here
// the team starts once per token and meets at 5 barriers per layer:
//
//   each thread:  xn = rmsnorm(x) ⊙ attn_norm        (its own copy: C values, cheaper than a barrier)
//   split rows:   [q; k; v] = xn·[wq; wk; wv]ᵀ (+ [bq; bk; bv]) as one row space of NH·HS + 2·NKV·HS rows;
//                 k and v go straight into the cache at pos; RoPE turns the thread's q and k rows
//                 (with q/k norms: a barrier, then each head normalised and turned by one thread)
//   split heads:  att_h = attention_head(q_h, k[first..pos], v[first..pos])   (first > 0: sliding window)
//   split rows:   x[r] += (att·woᵀ)[r]
//   each thread:  xn = rmsnorm(x) ⊙ ffn_norm
//   split rows:   hb[j] = silu((xn·w1ᵀ)[j]) · (xn·w3ᵀ)[j]          (w1 and w3 rows j together)
//   split rows:   x[r] += (hb·w2ᵀ)[r]
// (a barrier after each "split" phase: the next phase reads what every thread wrote), and at the end
// xn = rmsnorm(x) ⊙ final_norm, logits = xn·classifierᵀ split by rows.
//
// Every output element is computed by one thread with the kernels of the prefill path (matvec_range,
// rope_rotate, attention_head, the same rmsnorm and SwiGLU expressions), so the logits equal
// llama_block_forward's bit for bit, whatever the number of threads.
#include <omp.h>

#include <cmath>
#include <vector>

#include "model/family/llama/llama.h"
#include "runtime/cpu/kernels.h"

namespace orion {
namespace {

constexpr int kRowUnit = 16;  // rows are handed to threads in multiples of this (the kernels' step)

// One matrix of a row space shared out as a whole: rows [first, first + rows) of the space are
// rows [0, rows) of W, written to y.
struct RowSegment {
  const Tensor* W;
  const Tensor& bias;  // empty: none
  float* y;
  int first, rows;
};

// The calling thread's rows of y = xn·Wᵀ for every segment of a row space (all with K columns),
// shared out as one range so that the threads stream equal parts of the concatenated matrices.
// After each segment's rows are done, after(seg, r0, r1) runs on them (RoPE).
template <size_t S, typename After>
void matvec_segments(const RowSegment (&segs)[S], const float* xn, int K, After after) {
  const int total = segs[S - 1].first + segs[S - 1].rows;
  int r0, r1;
  cpu::thread_share(total, kRowUnit, &r0, &r1);
  for (size_t s = 0; s < S; s++) {
    const int a = std::max(r0, segs[s].first) - segs[s].first;
    const int b = std::min(r1, segs[s].first + segs[s].rows) - segs[s].first;
    if (a >= b) continue;
    const float* bias = segs[s].bias.empty() ? nullptr : segs[s].bias.f32();
    cpu::matvec_range(segs[s].y, xn, segs[s].W->data, segs[s].W->dtype, bias, K, a, b);
    after(s, a, b);
  }
}

// x[r] += (in·Wᵀ)[r] for the calling thread's rows r; tmp holds the products.  in: [K], W: [N, K]
void matvec_add_rows(float* x, float* tmp, const float* in, const Tensor& W, int K, int N) {
  int r0, r1;
  cpu::thread_share(N, kRowUnit, &r0, &r1);
  cpu::matvec_range(tmp, in, W.data, W.dtype, nullptr, K, r0, r1);
  for (int r = r0; r < r1; r++) x[r] += tmp[r];
}

}  // namespace

void llama_decode_token(const ModelWeights& w, Transformer::Activations& a, int pos, float* key_cache, float* value_cache,
                        int max_seq, float* logits) {
  const ModelConfig& c = w.config;
  const int C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS, KV = c.kv_dim(), H = c.hidden_dim;
  const int group = c.n_heads / c.n_kv_heads;
  float* x = a.x.data();
  std::vector<float> cs(static_cast<size_t>(HS));  // RoPE cos/sin at pos: the same for every layer
  cpu::rope_angles(cs.data(), llama_rope_frequencies(c).data(), HS, pos);
  const int first = cpu::attention_start(pos, c.sliding_window);  // the oldest position attended to
  const int len = pos + 1 - first;

#pragma omp parallel
  {
    std::vector<float> xn(static_cast<size_t>(C));     // this thread's normalised copy of x
    std::vector<float> att(static_cast<size_t>(len));  // attention scores of one head
    for (int l = 0; l < c.n_layers; l++) {
      const LayerWeights& lw = w.layers[size_t(l)];
      float* k = key_cache + (size_t(l) * max_seq + pos) * KV;  // this token's cache rows
      float* v = value_cache + (size_t(l) * max_seq + pos) * KV;

      // --- attention ---
      cpu::rmsnorm(xn.data(), x, lw.attn_norm.f32(), 1, C, c.norm_eps);
      const RowSegment qkv[3] = {{&lw.wq, lw.bq, a.q.data(), 0, Q},
                                 {&lw.wk, lw.bk, k, Q, KV},
                                 {&lw.wv, lw.bv, v, Q + KV, KV}};
      const bool head_norms = !lw.q_norm.empty();  // Qwen3: a head is normalised whole before it turns
      matvec_segments(qkv, xn.data(), C, [&](size_t s, int r0, int r1) {
        if (s < 2 && !head_norms) cpu::rope_rotate(qkv[s].y, cs.data(), HS, r0, r1);  // q and k turn; v does not
      });
#pragma omp barrier
      if (head_norms) {
#pragma omp for schedule(static)
        for (int h = 0; h < c.n_heads + c.n_kv_heads; h++) {  // q heads, then k heads
          const bool is_q = h < c.n_heads;
          float* head = is_q ? a.q.data() + size_t(h) * HS : k + size_t(h - c.n_heads) * HS;
          cpu::rmsnorm(head, head, (is_q ? lw.q_norm : lw.k_norm).f32(), 1, HS, c.norm_eps);
          cpu::rope_rotate(head, cs.data(), HS, 0, HS);
        }  // (implicit barrier)
      }
      // the layer's cache, positions first..pos
      const float* kl = key_cache + (size_t(l) * max_seq + first) * KV;
      const float* vl = value_cache + (size_t(l) * max_seq + first) * KV;
#pragma omp for schedule(static, 1)
      for (int h = 0; h < c.n_heads; h++) {
        const size_t kvh = size_t(h / group) * HS;
        cpu::attention_head(a.att.data() + size_t(h) * HS, a.q.data() + size_t(h) * HS, kl + kvh, vl + kvh, len, HS, KV,
                            att.data());
      }  // (implicit barrier)
      matvec_add_rows(x, a.xb.data(), a.att.data(), lw.wo, Q, C);
#pragma omp barrier

      // --- feed-forward (SwiGLU) ---
      cpu::rmsnorm(xn.data(), x, lw.ffn_norm.f32(), 1, C, c.norm_eps);
      int j0, j1;
      cpu::thread_share(H, kRowUnit, &j0, &j1);
      float* hb = a.hb.data();
      float* up = a.hb2.data();
      cpu::matvec_range(hb, xn.data(), lw.w1.data, lw.w1.dtype, nullptr, C, j0, j1);
      cpu::matvec_range(up, xn.data(), lw.w3.data, lw.w3.dtype, nullptr, C, j0, j1);
      for (int j = j0; j < j1; j++) hb[j] = hb[j] / (1.0f + std::exp(-hb[j])) * up[j];  // as cpu::swiglu
#pragma omp barrier
      matvec_add_rows(x, a.xb.data(), hb, lw.w2, H, C);
#pragma omp barrier
    }
    // --- final norm and classifier (the real vocabulary; llm.c's padding rows are skipped) ---
    cpu::rmsnorm(xn.data(), x, w.final_norm.f32(), 1, C, c.norm_eps);
    int r0, r1;
    cpu::thread_share(c.vocab_size, kRowUnit, &r0, &r1);
    cpu::matvec_range(logits, xn.data(), w.classifier.data, w.classifier.dtype, nullptr, C, r0, r1);
  }
}

}  // namespace orion
