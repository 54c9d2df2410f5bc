// Internal to runtime/cpu: the kernels that exist once per instruction set, and the table that
// dispatch.cpp fills with one of them at start-up.
//
// Every function here is single-threaded; the OpenMP loops that split the work live in
// dispatch.cpp and gemm.cpp, so the three versions differ only in how they vectorise.
//
// Determinism rule: for a given ISA, the order in which each output element is summed depends only
// on the sizes (K, n), never on which rows a call is given. That is what makes a matmul split over
// 1 or 2 threads give bit-identical results.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "runtime/cpu/kernels.h"

namespace orion::cpu {

// How far ahead the streaming kernels of every ISA prefetch each weight row: twice. The hardware
// prefetcher alone keeps too few lines in flight for one core to reach its share of the memory
// bandwidth, and so does a prefetch into L1 alone: a core has only ~16 L1 fill buffers, so at
// ~100 ns of DRAM latency it cannot have more than ~16 × 64 B in flight (≈ 10 GB/s). A prefetch
// into L2 (T1) far ahead uses the L2's larger miss queue; the near one into L1 (T0) then hits in L2. Distances measured on Stories110M
// f16 decode, 2 threads, alternating runs (bench/RESULTS.md): 2 KB T0 only 76.5 tok/s median,
// 8 KB T0 + 128 KB T1 95.0; T0 alone past 24 KB falls (lines leave the 48 KB L1 before use).
// (A prefetch past the end of W is harmless: it never faults.)
constexpr int PREFETCH_L1_BYTES = 8 << 10;
constexpr int PREFETCH_L2_BYTES = 128 << 10;

struct Q8Activations;  // kernels_q8.h

struct IsaKernels {
  Isa isa;
  // Decode rows n0 .. n1−1 of y = x·Wᵀ (+ bias):  y[n] = Σ_k x[k]·W[n, k]
  //   x: [K] fp32;  W: [N, K] in dtype wt;  y: [N];  bias: [N] or nullptr.
  void (*matvec_rows)(float* y, const float* x, const void* W, DType wt, const float* bias, int K, int n0, int n1);
  // The same rows for q8_0 weights from x already quantised (quantize_activations, kernels_q8.h):
  // matvec_rows for Q8_0 is this after quantising x.
  void (*q8_matvec_quantized)(float* y, const int8_t* xq, const float* xd, const void* W, const float* bias, int K,
                              int n0, int n1);
  // Prefill columns n0 .. n1−1 of y[M, N] = x[M, K]·W[N, K]ᵀ (+ bias), every element summed in
  // the same order as matvec_rows (so prefill and decode agree bit for bit). `scratch` holds
  // (n1 − n0) × K floats (f16/bf16 weight rows widened to fp32 once, reused by all M rows; q8_0
  // weights stay int8 and need none).
  void (*gemm_rows)(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N, int n0,
                    int n1, float* scratch);
  int gemm_rows_step;  // weight rows per tile of gemm_rows; threads split N in multiples of it
  // gemm_rows for q8_0 weights from the M tokens already quantised (quantize_activations,
  // kernels_q8.h): gemm_rows for Q8_0 is this after quantising x. Callers that split one product
  // into many calls quantise once.
  void (*q8_gemm_quantized)(float* y, const Q8Activations& a, const void* W, const float* bias, int M, int K, int N, int n0,
                            int n1);
  // dst[i] = fp32(src[i]) for i < n (f32, f16, bf16 or q8_0 source; n a multiple of 32 for q8_0).
  void (*to_f32)(float* dst, const void* src, DType dt, size_t n);
  // Σ_i a[i]·b[i], and y[i] += s·x[i]: the two loops of attention over head_dim.
  float (*dot)(const float* a, const float* b, int n);
  void (*axpy)(float* y, float s, const float* x, int n);
  // One query head against `len` cached positions p, rows k_p = k + p·kv_stride (v_p likewise):
  //   scores:       att[p] = dot(q, k_p, head_dim)·scale
  //   weighted_sum: out = Σ_p att[p]·v_p, i.e. out = 0, then axpy(out, att[p], v_p) for p = 0, 1, …
  // equal to those loops bit for bit, but with several positions (scores) or a slice of out kept in
  // registers over all positions (weighted_sum) per pass: the loops' per-position call, horizontal
  // sum and load/store of out were most of a decode's attention time.
  void (*scores)(float* att, const float* q, const float* k, int len, int head_dim, int kv_stride, float scale);
  void (*weighted_sum)(float* out, const float* att, const float* v, int len, int head_dim, int kv_stride);
  // The same two over an f16 cache: each k_p, v_p element widened to fp32 (exact), then the same
  // FMAs in the same order — the bits of scores / weighted_sum over the widened values.
  void (*scores_f16)(float* att, const float* q, const uint16_t* k, int len, int head_dim, int kv_stride, float scale);
  void (*weighted_sum_f16)(float* out, const float* att, const uint16_t* v, int len, int head_dim, int kv_stride);
  // q8_0 activations: `blocks` blocks of 32 values quantised (kernels_q8.h, q8_quantize_generic),
  // the same bits on every ISA.
  void (*q8_quantize)(const float* x, int8_t* q, float* d, size_t blocks);
  // x = exp(x − max) / Σ over n values (attention's scores, the sampler's logits). The vector forms
  // take the max and the sum in lanes and e^x from libmvec (within 1 ulp of expf), so their bits
  // differ from the scalar loop's by rounding; each ISA is deterministic, and decode and prefill
  // call the same one.
  void (*softmax)(float* x, int n);
  // The XOR of `words` 8-byte words from p (any alignment): the decode bound's read pass
  // (time_read_pass). Vector loads as wide as the ISA has, several in flight: the pass measures
  // how fast memory delivers the bytes, so its own instructions must not be what limits it (8-byte
  // loads read ~10–20% slower than 64-byte ones on the Zen 5 VM, bench/RESULTS.md).
  uint64_t (*read_fold)(const void* p, size_t words);
};

// The XOR of `words` 8-byte words from p, one at a time (the tails of read_fold).
inline uint64_t xor_words(const void* p, size_t words) {
  uint64_t f = 0;
  for (size_t i = 0; i < words; i++) {
    uint64_t w;
    std::memcpy(&w, static_cast<const char*>(p) + 8 * i, 8);
    f ^= w;
  }
  return f;
}

// One table per instruction set; the AVX tables are only used when the CPU has the instructions.
extern const IsaKernels kGenericKernels;
extern const IsaKernels kAvx2Kernels;
extern const IsaKernels kAvx512Kernels;

// The table in use (set at start-up, or by set_isa).
const IsaKernels& isa_kernels();

// Prefill: y[M, N] = x[M, K]·W[N, K]ᵀ (+ bias) for M > 1, split over threads (gemm.cpp).
void matmul_prefill(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N);
// Weight rows per L2-sized panel of K fp32 columns, in multiples of `step` (gemm.cpp).
int panel_rows(int K, int step);
// The GEMM library's prompt path (gemm_library.cpp): whether matmul() hands this product to it, and
// the product itself (Orion's matmul_prefill when the build has no library).
bool use_library_gemm(DType wt, int M);
void matmul_library(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N);

}  // namespace orion::cpu
