// CPU kernels for training: the gradients of y = x·Wᵀ (+ b), and the transposes they are built on.
//
// Forward (cpu::matmul):  y[M, N] = x[M, K] · W[N, K]ᵀ + b[N]
// Backward, given dy = ∂loss/∂y [M, N]:
//   dx[M, K] += dy · W         (each input channel collects from every output it fed)
//   dW[N, K] += dyᵀ · x        (outer products of output gradients and inputs, summed over M tokens)
//   db[N]    += Σ_m dy[m, :]
// All three accumulate (+=), as gradients of shared inputs and of accumulation steps do.
//
// With AVX-512 both products are gemm_acc (broadcast-FMA tiles on the operands as they lie);
// otherwise they reuse cpu::matmul (register-tiled, multithreaded) on transposed operands, the
// output dimension N in chunks of kTrainChunk columns to keep the scratch memory small (a
// 50257-token classifier would otherwise need its full transpose). Either way every element is
// summed in an order fixed by the sizes alone: the result is bit-identical for any number of threads.
#pragma once
#include <cstddef>
#include <cstdint>

namespace orion::cpu {

constexpr int kTrainChunk = 1024;

// dst[cols, rows] = src[rows, cols]ᵀ (multithreaded, cache-blocked).
void transpose(float* dst, const float* src, int rows, int cols);

// y[M, N] = x[M, K]·W[N, K]ᵀ (+ b): with gemm_acc_bt (W read in place, its blocks transposed into
// panels in registers), else cpu::matmul. Summed in an order fixed by the sizes (bit-identical for any thread count), but
// not the order of cpu::matmul: training's logits may differ from inference's in the last bits.
void matmul_forward_train(float* y, const float* x, const float* W, const float* bias, int M, int K, int N);
// dx[M, K] += dy[M, N] · W[N, K]
void matmul_backward_input(float* dx, const float* dy, const float* W, int M, int K, int N);
// What a product does with its output C:
//   Accumulate     C += A·B
//   Overwrite      C = A·B (+ the bias row where the product takes one): bit for bit what adding to
//                  a zeroed (bias-filled) C gives, without reading C; plain stores (C is read soon)
//   OverwriteCold  the same for a C nobody reads soon (a weight gradient whose zeroing was left to
//                  its first write, train/cpu/first_write_zero.h; 50 MB of logits): whole aligned
//                  lines of its last write go past the caches (non-temporal stores, no line read first)
enum class COut { Accumulate, Overwrite, OverwriteCold };

// dW[N, K] += dy[M, N]ᵀ · x[M, K]   (or = with COut::Overwrite*)
void matmul_backward_weight(float* dW, const float* dy, const float* x, int M, int K, int N, COut out = COut::Accumulate);
// db[N] += Σ_m dy[m, n]   (each column summed in row order)
void bias_backward(float* db, const float* dy, int M, int N);

// C[M, N] += A·B with A(i, p) = A[i·rsa + p·csa] (so Aᵀ needs no copy), B [K, N] row-major with
// row stride ldb, C row stride ldc; multithreaded, each C element one FMA chain over p in order
// (train_gemm.cpp; register tiles for AVX-512 and AVX2, the same bits on both). Available on
// those two paths (gemm_acc_available()); the portable path uses transposes + cpu::matmul.
bool gemm_acc_available();
void gemm_acc(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* B, size_t ldb, int M, int N, int K,
              COut out = COut::Accumulate);
// The same with B given as its transpose Bt [N, K] (B(p, j) = Bt[j·ldbt + p]: a weight W of
// y = x·Wᵀ, read in place), its blocks packed into panels through transposes in registers; the
// same FMA chains, so the same bits as gemm_acc on a transposed copy. Where gemm_acc is.
void gemm_acc_bt(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const float* Bt, size_t ldbt, int M, int N,
                 int K, COut out = COut::Accumulate);
// C[r, 0 .. N) = bias (or 0 when null) for r < M (row stride ldc), split over threads.
void fill_rows(float* C, size_t ldc, int M, int N, const float* bias);

// --- Low-precision products (mixed-precision training, train_gemm_lowp.cpp) -------------------
// With the precision set to BF16 or F16, matmul_forward_train, matmul_backward_input and
// matmul_backward_weight round both operands of their product to that format (round to nearest
// even) and sum the products in fp32; the fp32 values they read (master weights, activations,
// gradients) are not changed. F32, the default, is the plain path above, bit for bit.
// The setting is process-wide: a training run sets it once before its first step.
enum class GemmPrecision { F32, BF16, F16 };
void set_train_gemm_precision(GemmPrecision p);
GemmPrecision train_gemm_precision();
// Sets the precision for its lifetime, then restores the one before (a run, a benchmark).
class ScopedGemmPrecision {
 public:
  explicit ScopedGemmPrecision(GemmPrecision p) : before_(train_gemm_precision()) { set_train_gemm_precision(p); }
  ~ScopedGemmPrecision() { set_train_gemm_precision(before_); }
  ScopedGemmPrecision(const ScopedGemmPrecision&) = delete;
  ScopedGemmPrecision& operator=(const ScopedGemmPrecision&) = delete;

 private:
  GemmPrecision before_;
};
// AVX512-BF16 (vdpbf16ps) on this CPU and AVX-512 the active ISA: bf16 products run on it.
bool bf16_dot_available();
// Auto: vdpbf16ps when bf16_dot_available() and prec is BF16; Generic: operands rounded to prec
// and kept as fp32, multiplied by cpu::matmul (every ISA; fp16 always). Tests compare both.
enum class LowpPath { Auto, Generic };
// C[M, N] += round(A)·round(B), A(i, p) = A[i·rsa + p·csa], B(p, j) = B[p·rsb + j·csb], C row
// stride ldc; multithreaded, bit-identical for any thread count.
// bias (Overwrite* only): C = bias[j] down each column j + A·B.
void gemm_acc_lowp(GemmPrecision prec, LowpPath path, float* C, size_t ldc, const float* A, size_t rsa, size_t csa,
                   const float* B, size_t rsb, size_t csb, int M, int N, int K, COut out = COut::Accumulate,
                   const float* bias = nullptr);

// A weight W [N, K] packed as the bf16 right operand of its two products (bf16_weight_packs.h):
// Rows for y = x·Wᵀ, Cols for dx = dy·W. Words of each layout, and both written in one pass over W
// (vdpbf16ps path only: call when bf16_dot_available()).
enum class KeptLayout { Rows, Cols };
size_t kept_pack_words(int N, int K, KeptLayout layout);
void pack_weight_bf16(const float* W, int N, int K, uint32_t* rows, uint32_t* cols);
// Rows [r0, r1) of both layouts (r0 a multiple of 16; r1 too, or ≥ N), on the calling thread.
void pack_weight_bf16_rows(const float* W, int N, int K, uint32_t* rows, uint32_t* cols, int r0, int r1);
// C[M, N] += round(A)·B with B an operand packed by pack_weight_bf16 (K its reduction length).
void gemm_acc_bf16_kept(float* C, size_t ldc, const float* A, size_t rsa, size_t csa, const uint32_t* kept, int M,
                        int N, int K, COut out = COut::Accumulate, const float* bias = nullptr);

// --- Vector kernels of the training step's other work (train_simd.cpp, train_simd_avx2.cpp) -----
// Use them only when train_simd_available() (the active ISA is AVX-512 or AVX2: each entry point
// runs the kernel of the active one; attention has its own test below); each is single-threaded
// (callers split the work) and documents how its bits relate to the portable loop it replaces.
bool train_simd_available();

// One AdamW update of n elements (see train/loop/adamw.h for the formula): bit-identical to the loop
//   g' = g·gscale; m = β1·m + (1−β1)·g'; v = β2·v + (1−β2)·g'·g'; p −= lr·((m/c1)/(√(v/c2) + ε) + decay·p)
struct AdamWScalars {
  float gscale, beta1, beta2, c1, c2, eps, lr, decay;
};
void adamw_update_simd(float* p, const float* g, float* m, float* v, size_t n, const AdamWScalars& s);
// Σ g² in double over 8 lanes (lane j: i ≡ j mod 8), lanes then tail summed in order.
double sum_squares_simd(const float* g, size_t n);

// GELU (tanh form) over n elements: out = ½x(1 + th), th = tanh(√(2/π)(x + 0.044715x³)) kept for
// the backward (th == nullptr: not kept; out may be x), dinp += dout·(½(1 + th) + ½x(1 − th²)√(2/π)(1 + 3·0.044715x²)).
void gelu_forward_simd(float* out, float* th, const float* x, size_t n);
void gelu_backward_simd(float* dinp, const float* dout, const float* x, const float* th, size_t n);

// SwiGLU over n elements: out = silu(gate)·up (out may be gate);
// dgate += dout·up·σ(1 + gate(1 − σ)), dup += dout·gate·σ.
void swiglu_forward_simd(float* out, const float* gate, const float* up, size_t n);
void swiglu_backward_simd(float* dgate, float* dup, const float* dout, const float* gate, const float* up, size_t n);

// Cross-entropy over one row of V logits: exp_sum_simd returns Σ_i e^(l_i − max) in double and
// the max in *row_max; softmax_scaled_simd writes d_i = scale·e^(l_i − lse) (d may alias l).
double exp_sum_simd(const float* l, int V, float* row_max);
void softmax_scaled_simd(float* d, const float* l, float lse, float scale, int V);

// One (sequence, head) of causal attention (train_attention_simd.cpp: the kernels of the active ISA,
// train_attention_avx512.cpp or train_attention_avx2.cpp). q, out, dout, dq point at
// time 0 of the query head's rows, q_stride floats apart; k, v, dk, dv at time 0 of its kv head's
// rows, kv_stride apart; att [T, T] its probabilities (row t: 0 past t). Forward:
// att[t] = softmax(q_t·k_s·scale over attention_start(t, window) ≤ s ≤ t), 0 elsewhere; out_t = Σ_s att[t, s]·v_s.
// Backward (adds to dq, dk, dv): dv_s += Σ_t att[t, s]·dout_t, dq_t += Σ_s ds[t, s]·k_s,
// dk_s += Σ_t ds[t, s]·q_t, ds[t, s] = att[t, s]·(dout_t·v_s − Σ_u att[t, u]·dout_t·v_u)·scale.
// Single-threaded; available when AVX-512 or AVX2 is the active ISA (any HS ≥ 1).
bool attention_simd_available(int HS);
void attention_head_forward_simd(float* out, float* att, const float* q, const float* k, const float* v, size_t q_stride,
                                 size_t kv_stride, int T, int HS, float scale, int window);
void attention_head_backward_simd(float* dq, float* dk, float* dv, const float* dout, const float* att, const float* q,
                                  const float* k, const float* v, size_t q_stride, size_t kv_stride, int T, int HS,
                                  float scale);

}  // namespace orion::cpu
