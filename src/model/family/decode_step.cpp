// A decode step: one token through every block, the final norm and the classifier inside ONE
// OpenMP parallel region, for any family — the block is read from its anatomy (family.h): RMSNorm or
// LayerNorm, RoPE or learned positions (added to x before the first block), SwiGLU or GELU, biases
// where the weights have them, q/k head norms, a sliding window.
//
// Decode is memory-bound: each weight is read once for 2 flops, so a token costs the bytes of the
// weights over the memory bandwidth — plus the time threads spend starting and waiting for each
// other. The families' block_forward starts a parallel region for every matrix product (6–8 per
// layer); here the team starts once per token and meets at 4 barriers per layer:
//
//   each thread:  xn = norm(x)                  (its own copy: C values, cheaper than a barrier)
//   split heads:  each thread owns NKV/threads kv heads and their query heads: it computes their
//                 rows of q, k, v = xn·[wq; wk; wv]ᵀ (+ biases), normalises (q/k norms) and turns
//                 (RoPE) those heads, puts their k and v into the cache at pos, then
//                 att_h = attention_head(q_h, k[first..pos], v[first..pos]) for its query heads
//                 (first > 0: sliding window) — every input of its attention is its own, so no
//                 barrier between the products and the attention.
//                 (When the threads cannot share the kv heads evenly: the rows of [q; k; v] are shared
//                 out as one row space, a barrier, then the heads — 5 barriers per layer.)
//   split rows:   x[r] += (att·woᵀ + bo)[r]
//   each thread:  xn = norm(x)
//   split rows:   SwiGLU: hb[j] = silu((xn·w1ᵀ)[j]) · (xn·w3ᵀ)[j]     (w1 and w3 rows j together)
//                 GELU:   hb[j] = gelu((xn·w1ᵀ + b1)[j])
//   split rows:   x[r] += (hb·w2ᵀ + b2)[r]
// (a barrier after each "split" phase: the next phase reads what every thread wrote), and at the end
// xn = norm(x), logits = xn·classifierᵀ split by rows.
// Each split phase starts as thread_share would split it, but a thread done with its own heads or
// rows takes the rest of a slower thread's from the back (cpu::WorkShares): on the Zen 5 VM one
// core streamed memory slower than the other, and the faster one spent ~20% of a token waiting
// at the barriers.
//
// With a DecodeProfile attached (decode_profile.h; `orion bench generate --phases`) each thread
// also times its phases and its waits at the barriers.
//
// Every output element is computed by one thread with the kernels of the prefill path (matvec_range,
// rope_rotate, attention_head, the same norms, SwiGLU and GELU expressions), so the logits equal
// block_forward's bit for bit, whatever the number of threads.
#include <omp.h>

#include <chrono>
#include <cmath>
#include <vector>

#include "model/family/decode_profile.h"
#include "model/family/family.h"
#include "model/family/llama/llama.h"  // llama_rope_frequencies: every RoPE family turns as Llama
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/work_shares.h"

namespace orion {
namespace {

constexpr int kRowUnit = 16;   // rows are handed to threads in multiples of this (the kernels' step)
constexpr int kStepUnits = 4;  // units a thread takes from the front of its own run at a time

// A thread's input to a phase's products, made ready (cpu::prepare_matvec_input) for the dtype of
// the matrix it meets: again only when that dtype changes, so that with q8_0 weights the thread
// quantises it once per phase, not once per run of rows it takes.
struct Input {
  cpu::MatvecInput in;
  Input(const float* x, int K) : in{x, K, DType::F32} {}  // f32 weights need no preparation
  const cpu::MatvecInput& for_matrix(const Tensor& W) {
    if (in.wt != W.dtype) in = cpu::prepare_matvec_input(in.x, in.K, W.dtype);
    return in;
  }
};

// Rows [r0, r1) of y = in·Wᵀ (+ bias).
void matvec_tensor_rows(float* y, Input& in, const Tensor& W, const Tensor& bias, int r0, int r1) {
  cpu::matvec_range(y, in.for_matrix(W), W.data, bias.empty() ? nullptr : bias.f32(), r0, r1);
}

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
void matvec_segments(const RowSegment (&segs)[S], Input& xn, After after) {
  const int total = segs[S - 1].first + segs[S - 1].rows;
  int r0, r1;
  cpu::thread_share(total, kRowUnit, &r0, &r1);
  for (size_t s = 0; s < S; s++) {
    const int a = std::max(r0, segs[s].first) - segs[s].first;
    const int b = std::min(r1, segs[s].first + segs[s].rows) - segs[s].first;
    if (a >= b) continue;
    matvec_tensor_rows(segs[s].y, xn, *segs[s].W, segs[s].bias, a, b);
    after(s, a, b);
  }
}

// x[r] += (in·Wᵀ + bias)[r] for the rows r the calling thread takes from `rows`; tmp holds the
// products.   in: [K], W: [N, K], bias: [N] or empty
void matvec_add_rows(cpu::WorkShares& rows, float* x, float* tmp, const float* in, const Tensor& W, const Tensor& bias,
                     int K) {
  Input input(in, K);
  int r0, r1;
  while (rows.next(kStepUnits, &r0, &r1)) {
    matvec_tensor_rows(tmp, input, W, bias, r0, r1);
    for (int r = r0; r < r1; r++) x[r] += tmp[r];
  }
}

// hb[j] = silu((xn·w1ᵀ)[j]) · (xn·w3ᵀ)[j] for the rows j the calling thread takes from `rows` (w1
// and w3 rows j together); up holds the second product.
void swiglu_rows(cpu::WorkShares& rows, float* hb, float* up, const float* xn, const LayerWeights& lw, int C) {
  Input in(xn, C);
  int j0, j1;
  while (rows.next(kStepUnits, &j0, &j1)) {
    matvec_tensor_rows(hb, in, lw.w1, Tensor{}, j0, j1);
    matvec_tensor_rows(up, in, lw.w3, Tensor{}, j0, j1);
    cpu::swiglu(hb + j0, hb + j0, up + j0, size_t(j1 - j0));  // elementwise: the same bits on any range
  }
}

// hb[j] = gelu((xn·w1ᵀ + b1)[j]) for the rows j the calling thread takes from `rows` (GPT-2).
void gelu_rows(cpu::WorkShares& rows, float* hb, const float* xn, const LayerWeights& lw, int C) {
  Input in(xn, C);
  int j0, j1;
  while (rows.next(kStepUnits, &j0, &j1)) {
    matvec_tensor_rows(hb, in, lw.w1, lw.b1, j0, j1);
    cpu::gelu_tanh_inplace(hb + j0, size_t(j1 - j0));  // elementwise: the same bits on any range
  }
}

// What one layer's attention reads and writes in a decode step.
struct AttentionStep {
  const ModelConfig& c;
  const LayerWeights& lw;
  Transformer::Activations& a;
  float* k;                   // this token's key row [NKV·HS] (a.k), before it enters the cache
  float* v;                   // this token's value row
  void* kc;                   // the layer's cache, layout kv (f32 or f16 elements)
  void* vc;
  const cpu::KvLayout& kv;
  const float* cs;            // RoPE cos/sin at pos; nullptr: learned positions, nothing turns
  int pos, first;             // this token's position; the oldest position attended to
};

// Query head h's attention over the step's cached positions into a.att.
void attend(const AttentionStep& s, int h, float* scores) {
  const int HS = s.c.head_dim(), group = s.c.n_heads / s.c.n_kv_heads;
  const int g = h / group;  // its kv head, from the oldest visible position
  cpu::attention_head(s.a.att.data() + size_t(h) * HS, s.a.q.data() + size_t(h) * HS, s.kv.address(s.kc, g, s.first),
                      s.kv.address(s.vc, g, s.first), s.pos + 1 - s.first, HS, int(s.kv.pos_stride), scores, s.kv.dtype);
}

// Heads h0 .. h1−1 of q (is_q) or of this token's k: normalised by the layer's q/k norm, then turned.
void norm_and_turn_heads(const AttentionStep& s, bool is_q, int h0, int h1) {
  const int HS = s.c.head_dim();
  for (int h = h0; h < h1; h++) {
    float* head = (is_q ? s.a.q.data() : s.k) + size_t(h) * HS;
    cpu::rmsnorm(head, head, (is_q ? s.lw.q_norm : s.lw.k_norm).f32(), 1, HS, s.c.norm_eps);
    if (s.cs) cpu::rope_rotate(head, s.cs, HS, 0, HS);
  }
}

// Kv heads [g0, g1), and their rows of q [q0, q1) and of k and v [k0, k1).
struct HeadShare {
  int g0, g1, q0, q1, k0, k1;
  HeadShare(const ModelConfig& c, int first, int last) : g0(first), g1(last) {
    const int HS = c.head_dim(), group = c.n_heads / c.n_kv_heads;
    q0 = g0 * group * HS, q1 = g1 * group * HS, k0 = g0 * HS, k1 = g1 * HS;
  }
};
// The calling thread's own run of kv heads (where it starts; it may take other threads' later).
HeadShare own_heads(const ModelConfig& c) {
  int first, last;
  cpu::thread_share(c.n_kv_heads, 1, &first, &last);
  return HeadShare(c, first, last);
}

// While a thread waits at a barrier or computes attention, the memory bus would idle: it starts
// fetching the first rows it reads next.
constexpr size_t kWarmBytes = 64 << 10;
void warm(const Tensor& W, int K, int r0, int r1) { cpu::prefetch_rows(W.data, W.dtype, K, r0, r1, kWarmBytes); }
// The calling thread's rows of W [N, K] as matvec_add_rows shares them out.
void warm_share(const Tensor& W, int K, int N) {
  int r0, r1;
  cpu::thread_share(N, kRowUnit, &r0, &r1);
  warm(W, K, r0, r1);
}

// Kv heads [first, last) and their query heads: q, k, v rows, norms and RoPE, and attention, with
// no other thread's output needed.
void attend_kv_heads(const AttentionStep& s, Input& xn, float* scores, int first, int last) {
  const ModelConfig& c = s.c;
  const LayerWeights& lw = s.lw;
  const int HS = c.head_dim(), group = c.n_heads / c.n_kv_heads;
  const auto [g0, g1, q0, q1, k0, k1] = HeadShare(c, first, last);
  // The heads' cached keys and values start coming into L2 while their rows of q, k, v are computed.
  for (int g = g0; g < g1; g++) cpu::prefetch_kv_head(s.kv, s.kc, s.vc, g, s.first, s.pos - s.first);
  matvec_tensor_rows(s.a.q.data(), xn, lw.wq, lw.bq, q0, q1);
  matvec_tensor_rows(s.k, xn, lw.wk, lw.bk, k0, k1);
  matvec_tensor_rows(s.v, xn, lw.wv, lw.bv, k0, k1);
  if (lw.q_norm.empty()) {
    if (s.cs) {  // learned positions (GPT-2): nothing turns
      cpu::rope_rotate(s.a.q.data(), s.cs, HS, q0, q1);
      cpu::rope_rotate(s.k, s.cs, HS, k0, k1);
    }
  } else {
    norm_and_turn_heads(s, true, g0 * group, g1 * group);
    norm_and_turn_heads(s, false, g0, g1);
  }
  s.kv.store(s.kc, s.pos, s.k, k0, k1);
  s.kv.store(s.vc, s.pos, s.v, k0, k1);
  for (int h = g0 * group; h < g1 * group; h++) attend(s, h, scores);
}

// The kv heads the calling thread takes from `heads`, one at a time, each as attend_kv_heads.
void attention_by_heads(const AttentionStep& s, cpu::WorkShares& heads, const float* xn, float* scores) {
  Input in(xn, s.c.dim);
  int g0, g1;
  while (heads.next(1, &g0, &g1)) attend_kv_heads(s, in, scores, g0, g1);
}

// The same results when the kv heads do not share out evenly over the threads: the q, k, v rows
// split as one row space, a barrier, the q/k norms by head (another barrier), then the query heads
// round-robin. Ends with a barrier.
void attention_by_rows(const AttentionStep& s, const float* xn, float* scores) {
  const ModelConfig& c = s.c;
  const LayerWeights& lw = s.lw;
  const int HS = c.head_dim(), Q = c.n_heads * HS, KV = c.kv_dim();
  const RowSegment qkv[3] = {{&lw.wq, lw.bq, s.a.q.data(), 0, Q},
                             {&lw.wk, lw.bk, s.k, Q, KV},
                             {&lw.wv, lw.bv, s.v, Q + KV, KV}};
  const bool head_norms = !lw.q_norm.empty();  // Qwen3: a head is normalised whole before it turns
  Input in(xn, c.dim);
  matvec_segments(qkv, in, [&](size_t seg, int r0, int r1) {
    if (seg < 2 && !head_norms && s.cs) cpu::rope_rotate(qkv[seg].y, s.cs, HS, r0, r1);  // q and k turn; v does not
    if (seg == 1 && !head_norms) s.kv.store(s.kc, s.pos, s.k, r0, r1);            // into the cache once final
    if (seg == 2) s.kv.store(s.vc, s.pos, s.v, r0, r1);
  });
#pragma omp barrier
  if (head_norms) {
#pragma omp for schedule(static)
    for (int h = 0; h < c.n_heads + c.n_kv_heads; h++) {  // q heads, then k heads
      if (h < c.n_heads) {
        norm_and_turn_heads(s, true, h, h + 1);
      } else {
        const int g = h - c.n_heads;
        norm_and_turn_heads(s, false, g, g + 1);
        s.kv.store(s.kc, s.pos, s.k, g * HS, (g + 1) * HS);
      }
    }  // (implicit barrier)
  }
#pragma omp for schedule(static, 1)
  for (int h = 0; h < c.n_heads; h++) attend(s, h, scores);  // (implicit barrier)
}

// A thread's clock for the decode profile: mark(p) adds the time since the last mark to phase p.
// Without a profile it does nothing.
class PhaseClock {
 public:
  explicit PhaseClock(std::array<double, DecodeProfile::kPhases>* seconds) : seconds_(seconds) {
    if (seconds_) last_ = std::chrono::steady_clock::now();
  }
  void mark(DecodeProfile::Phase p) {
    if (!seconds_) return;
    const auto now = std::chrono::steady_clock::now();
    (*seconds_)[p] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  std::array<double, DecodeProfile::kPhases>* seconds_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

void normalise_row(const Anatomy& an, float* y, const float* x, const Tensor& g, const Tensor& b, int C, float eps) {
  if (an.norm == NormKind::RMSNorm) cpu::rmsnorm(y, x, g.f32(), 1, C, eps);
  else cpu::layernorm(y, x, g.f32(), b.f32(), 1, C, eps);
}

void decode_step(const Anatomy& an, const ModelWeights& w, Transformer::Activations& a, int pos, KvCache& cache,
                 float* logits) {
  const ModelConfig& c = w.config;
  const int C = c.dim, HS = c.head_dim(), Q = c.n_heads * HS, H = c.hidden_dim;
  float* x = a.x.data();
  std::vector<float> cs;  // RoPE cos/sin at pos: the same for every layer
  if (an.positions == Positions::Rope) {
    cs.resize(size_t(HS));
    cpu::rope_angles(cs.data(), llama_rope_frequencies(c).data(), HS, pos);
  }
  const int first = cpu::attention_start(pos, c.sliding_window);  // the oldest position attended to
  const int len = pos + 1 - first;

  // Each phase's items (kv heads, matrix rows) as the threads take them: per layer the heads, wo,
  // w1(/w3) and w2 rows; then the classifier's.
  enum { kHeads, kWo, kW13, kW2, kPhases };
  std::vector<cpu::WorkShares> shares(size_t(kPhases * c.n_layers + 1));
  DecodeProfile* profile = decode_profile();
  using P = DecodeProfile;
#pragma omp parallel
  {
#pragma omp single
    {
      const int nt = omp_get_num_threads();
      if (profile) {
        if (profile->seconds.size() < size_t(nt)) profile->seconds.resize(size_t(nt));
        profile->tokens++;
      }
      for (int l = 0; l < c.n_layers; l++) {
        cpu::WorkShares* s = &shares[size_t(kPhases * l)];
        s[kHeads].reset(c.n_kv_heads, 1, nt);
        s[kWo].reset(C, kRowUnit, nt);
        s[kW13].reset(H, kRowUnit, nt);
        s[kW2].reset(C, kRowUnit, nt);
      }
      shares.back().reset(c.vocab_size, kRowUnit, nt);
    }  // (implicit barrier)
    std::vector<float> xn(static_cast<size_t>(C));     // this thread's normalised copy of x
    std::vector<float> att(static_cast<size_t>(len));  // attention scores of one head
    const bool by_heads = c.n_kv_heads % omp_get_num_threads() == 0;
    PhaseClock clock(profile ? &profile->seconds[size_t(omp_get_thread_num())] : nullptr);
    for (int l = 0; l < c.n_layers; l++) {
      const LayerWeights& lw = w.layers[size_t(l)];
      cpu::WorkShares* phase = &shares[size_t(kPhases * l)];
      const AttentionStep step{c,
                               lw,
                               a,
                               a.k.data(),
                               a.v.data(),
                               cache.k(l),
                               cache.v(l),
                               cache.layout(),
                               cs.empty() ? nullptr : cs.data(),
                               pos,
                               first};

      // --- attention ---
      normalise_row(an, xn.data(), x, lw.attn_norm, lw.attn_norm_b, C, c.norm_eps);
      if (by_heads) {
        attention_by_heads(step, phase[kHeads], xn.data(), att.data());
        warm_share(lw.wo, Q, C);
        clock.mark(P::Attention);
#pragma omp barrier
        clock.mark(P::WaitAttention);
      } else {
        attention_by_rows(step, xn.data(), att.data());  // (its barriers' waits count as attention)
        clock.mark(P::Attention);
      }
      matvec_add_rows(phase[kWo], x, a.xb.data(), a.att.data(), lw.wo, lw.bo, Q);
      warm_share(lw.w1, C, H);
      clock.mark(P::Projection);
#pragma omp barrier
      clock.mark(P::WaitWo);

      // --- feed-forward ---
      normalise_row(an, xn.data(), x, lw.ffn_norm, lw.ffn_norm_b, C, c.norm_eps);
      if (an.gated_ffn) swiglu_rows(phase[kW13], a.hb.data(), a.hb2.data(), xn.data(), lw, C);
      else gelu_rows(phase[kW13], a.hb.data(), xn.data(), lw, C);
      warm_share(lw.w2, H, C);
      clock.mark(P::FfnIn);
#pragma omp barrier
      clock.mark(P::WaitFfnIn);
      matvec_add_rows(phase[kW2], x, a.xb.data(), a.hb.data(), lw.w2, lw.b2, H);
      if (l + 1 == c.n_layers) warm_share(w.classifier, C, c.vocab_size);
      else if (by_heads) {
        const HeadShare own = own_heads(c);
        warm(w.layers[size_t(l + 1)].wq, C, own.q0, own.q1);
      }
      clock.mark(P::FfnOut);
#pragma omp barrier
      clock.mark(P::WaitFfnOut);
    }
    // --- final norm and classifier (the real vocabulary; llm.c's padding rows are skipped) ---
    normalise_row(an, xn.data(), x, w.final_norm, w.final_norm_b, C, c.norm_eps);
    Input in(xn.data(), C);
    int r0, r1;
    while (shares.back().next(kStepUnits, &r0, &r1)) matvec_tensor_rows(logits, in, w.classifier, Tensor{}, r0, r1);
    clock.mark(P::Classifier);
  }
}

bool ModelFamily::decode_token(const ModelWeights& w, Transformer::Activations& a, int pos, KvCache& cache,
                               float* logits) const {
  decode_step(anatomy(), w, a, pos, cache, logits);
  return true;
}

}  // namespace orion
