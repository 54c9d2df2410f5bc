// CPU kernels: the fp32 numerical reference of Orion and its fast inference path.
//
// Conventions: activations are fp32 row-major; x: [M, K] means M rows (tokens) of K channels.
// Weight matrices are [N, K] (out, in) in their stored dtype (f32, f16, bf16 or q8_0) and are
// applied as y = x · Wᵀ. With q8_0 weights (K a multiple of 32) the activations are quantised to
// int8 blocks too and the products are summed in integers (kernels_q8.h). Every kernel is
// multithreaded with OpenMP (set_num_threads) and vectorised; the instruction set (AVX-512, AVX2,
// portable C++) is chosen once at start-up (see dispatch.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace orion::cpu {

// --- threads and instruction set ---------------------------------------------------------------
void set_num_threads(int n);  // n ≤ 0: all cores
int num_threads();
enum class Isa { Generic, Avx2, Avx512 };
Isa active_isa();
const char* isa_name(Isa isa);  // "generic", "avx2", "avx512"
// Forces an instruction set (tests compare them); ignored (returns false) if the CPU lacks it.
bool set_isa(Isa isa);
// The environment variable ORION_ISA (generic, avx2, avx512) picks the instruction set at start-up
// when the CPU has it; otherwise the best one is used and this says why ("" when none was refused).
const std::string& isa_request_refused();

// How the decode matvec walks a thread's rows of W. Both sum every row the same way (the same bits);
// they differ in how memory sees the reads:
//   RowByRow   one row after the next, no software prefetch: a single sequential stream per thread,
//              which the hardware prefetcher follows on its own. Measured faster on AMD Zen 4
//              (Stories110M f16 decode +10–25%, q8_0 +8–22%; bench/RESULTS.md).
//   RowBlocks  8 rows side by side (x loaded once for all 8), each row prefetched ahead in software
//              into L1 and L2: 8 interleaved streams the hardware prefetcher cannot follow alone.
//              Measured at 95–118% of the STREAM bound on the Intel Xeon, where it was tuned.
// Default: RowByRow on AMD CPUs, RowBlocks on the others; the environment variable ORION_MATVEC
// (rows, blocks) at start-up or set_matvec_order changes it.
enum class MatvecOrder { RowByRow, RowBlocks };
MatvecOrder matvec_order();
void set_matvec_order(MatvecOrder order);
const char* matvec_order_name(MatvecOrder order);  // "rows", "blocks"

// --- linear algebra ------------------------------------------------------------------------------
// y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N] when bias != nullptr).
// M == 1 is the decode matrix–vector product (memory-bound: streams W once);
// M > 1 is prefill (compute-bound: each weight row is reused across the M tokens).
void matmul(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N);

// Which code computes prompt-sized products (M ≥ kLibraryGemmMinRows tokens, f32/f16/bf16 weights):
// Orion's register tiles, summed in the decode matvec's order (prefill rows bit-identical to
// decode), or oneDNN's sgemm when the build found it (faster on prompts; its own summation order,
// so those rows agree with decode to rounding, ~1e-6, not bit for bit). Decode, batched decode
// steps (fewer rows) and q8_0 weights always use Orion's kernels; either way the result does not
// depend on the thread count. Default: Orion's; ORION_GEMM=onednn at start-up or set_prefill_gemm
// (false if that path is not built) chooses the library.
enum class PrefillGemm { Orion, OneDnn };
constexpr int kLibraryGemmMinRows = 64;
bool prefill_gemm_available(PrefillGemm g);
bool set_prefill_gemm(PrefillGemm g);
PrefillGemm prefill_gemm();
const char* prefill_gemm_name(PrefillGemm g);  // "orion", "onednn"

// The GEMM rate this machine reaches, measured now with all threads on y[M, N] = x[M, K]·W[N, K]ᵀ
// (best of `reps`): fp32 weights through Orion's kernels and the library's (0 without one), and —
// when with_q8 (K a multiple of 32) — q8_0 weights through Orion's int8 kernels, which multiply
// faster than fp32 where the CPU has VNNI; best_flops is the fastest of them.
struct GemmPeak {
  double orion_flops = 0, library_flops = 0, q8_flops = 0, best_flops = 0;
};
GemmPeak measure_gemm_peak(int M, int K, int N, int reps, bool with_q8 = false);

// --- normalisation and elementwise ---------------------------------------------------------------
// These split over the threads only when given enough work (several rows; ≥ 64 Ki elements) and
// otherwise open no OpenMP region at all, so a decode step may call them on one row or a few
// elements from inside its own region (a nested region, even one kept to one thread by an if
// clause, costs ~3 µs to open).
// y[m, :] = x[m, :] / sqrt(mean(x[m, :]²) + eps) ⊙ w          x, y: [M, C]; w: [C]
void rmsnorm(float* y, const float* x, const float* w, int M, int C, float eps);
// y[m, :] = (x[m, :] − mean) / sqrt(var + eps) ⊙ w + b      x, y: [M, C]; w, b: [C]
void layernorm(float* y, const float* x, const float* w, const float* b, int M, int C, float eps);

void add_inplace(float* y, const float* x, size_t n);                 // y += x
void gelu_tanh_inplace(float* x, size_t n);                           // x = 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))
void swiglu(float* h, const float* gate, const float* up, size_t n);  // h = silu(gate) ⊙ up, silu(g) = g·σ(g)
void softmax_inplace(float* x, int n);                                // x = exp(x − max) / Σ

// --- embeddings and positions --------------------------------------------------------------------
// out[C] = row `id` of table [rows, C] (any dtype) converted to fp32.
void embedding_row(float* out, const void* table, DType dt, int64_t id, int C);
// RoPE on one token, llama2.c convention: for each head and pair i (x[2i], x[2i+1]) is rotated by
// angle pos · theta^(−2i/HS). x: [n_heads, HS].
void rope(float* x, int n_heads, int head_dim, int pos, float theta);
// rope() in two parts, for code that rotates parts of a vector on different threads:
//   cs[2i], cs[2i+1] = cos, sin of pair i's angle at pos            cs: [head_dim]
//   channels c0 .. c1−1 of x (even bounds; x: [heads, head_dim]) rotated by those angles
void rope_angles(float* cs, int head_dim, int pos, float theta);
void rope_rotate(float* x, const float* cs, int head_dim, int c0, int c1);
// The plain frequencies of the pairs: inv_freq[i] = 1 / theta^(2i/HS), i < HS/2 (what rope_angles
// turns by), for code that scales them (llama3 RoPE scaling) before use.
void rope_frequencies(float* inv_freq, int head_dim, float theta);
// rope_angles with given frequencies: cs[2i], cs[2i+1] = cos, sin of pos·inv_freq[i]. Bit-identical
// to rope_angles when inv_freq comes from rope_frequencies.
void rope_angles(float* cs, const float* inv_freq, int head_dim, int pos);

// --- attention ---------------------------------------------------------------------------------
// Where a layer's KV cache keeps position p of kv head g: element at(g, p) of the cache (values
// alike), each element a `dtype` (f32, or f16 for half the memory and bytes read per step). Two layouts:
//   rows:  [S, NKV·HS]  one row per position, as a matmul writes it (pos_stride NKV·HS, head_stride HS)
//   heads: [NKV, S, HS] each kv head's positions one after another (pos_stride HS, head_stride S·HS):
//          a decode step reads each head's keys and values as one sequential stream instead of
//          HS floats out of every NKV·HS, a stride the hardware prefetchers do not follow.
// An f16 cache holds each value rounded to the nearest f16 (f32_to_f16); attention widens them back
// exactly, so it gives the bits an f32 cache holding those rounded values gives.
struct KvLayout {
  size_t pos_stride, head_stride;
  int head_dim;
  DType dtype = DType::F32;  // F32 or F16
  static KvLayout rows(int kv_dim, int head_dim, DType dt = DType::F32) {
    return {size_t(kv_dim), size_t(head_dim), head_dim, dt};
  }
  static KvLayout heads(int max_seq, int head_dim, DType dt = DType::F32) {
    return {size_t(head_dim), size_t(max_seq) * size_t(head_dim), head_dim, dt};
  }
  size_t at(int head, int pos) const { return size_t(head) * head_stride + size_t(pos) * pos_stride; }
  size_t elem_bytes() const { return dtype == DType::F16 ? 2 : 4; }
  // The address of element at(head, pos) of a cache starting at `cache`.
  const void* address(const void* cache, int head, int pos) const {
    return static_cast<const char*>(cache) + at(head, pos) * elem_bytes();
  }
  // Channels c0 .. c1−1 of one position's row (row[c]: channel c of [NKV·HS]) into the cache at pos,
  // rounded to f16 for an f16 cache.
  void store(void* cache, int pos, const float* row, int c0, int c1) const;
};

// Causal attention of T new query tokens at positions pos0 .. pos0+T−1 against a KV cache holding
// positions 0 .. pos0+T−1 (the new tokens' keys/values already written).
//   q:   [T, NH·HS]          out: [T, NH·HS]
//   k, v: one layer's cache in layout kv (positions 0 .. pos0+T−1); head h reads kv head h / (NH/NKV)
// scores = q·kᵀ / √HS over positions ≤ its own, softmax, then weighted sum of v.
// window > 0: a query at position p sees only positions p − window + 1 .. p (a sliding window).
void attention(float* out, const float* q, const void* k, const void* v, int T, int pos0, int n_heads, int n_kv_heads,
               const KvLayout& kv, int window = 0);
// Attention of one new token in each of B sequences (a batched decode step): row b's query at
// position pos attends to its own cache's positions ≤ pos (its key/value already written). Each
// (row, head) is attention_head, as attention() computes it for T = 1 — same bits — but all rows
// share one parallel region instead of one each.
struct AttentionRow {
  float* out;      // [NH·HS]
  const float* q;  // [NH·HS]
  const void* k;   // one layer's cache of the row's sequence, layout kv
  const void* v;
  int pos;
};
void attention_rows(const AttentionRow* rows, int B, int n_heads, int n_kv_heads, const KvLayout& kv, int window = 0);
// The same, called by every thread of the caller's parallel region, each taking its share of the
// (row, head) tasks (no barrier at the end).
void attention_rows_in_team(const AttentionRow* rows, int B, int n_heads, int n_kv_heads, const KvLayout& kv,
                            int window = 0);
// Asks for kv head `head`'s keys and values at positions first .. first+len−1 of one layer's cache
// (layout kv) to be brought into L2, all at once (at most the first 128 KB of each): for memory a
// thread reads next while it computes.
void prefetch_kv_head(const KvLayout& kv, const void* k, const void* v, int head, int first, int len);
// The first position a query at pos sees: 0, or pos − window + 1 with a sliding window (window > 0).
inline int attention_start(int pos, int window) { return window > 0 && pos >= window ? pos - window + 1 : 0; }

// One query head of one token against `len` cached positions (the causal window), single-threaded:
//   att[p] = q·k_p / √HS,  att = softmax(att),  out = Σ_p att[p]·v_p
//   q, out: [HS];  k, v: the head's positions p = 0 .. len−1, kv_stride elements apart, in kv_dtype
//   (F32 or F16);  scratch: ≥ len floats
void attention_head(float* out, const float* q, const void* k, const void* v, int len, int head_dim, int kv_stride,
                    float* scratch, DType kv_dtype = DType::F32);

// --- building blocks for code that runs inside its own OpenMP parallel region -------------------
// (a decode step runs a whole token in one region, see model/family/decode_step.cpp; these never start
// threads themselves)
// The calling thread's share [first, last) of n items, split in contiguous units of `unit` items
// (the whole range when called outside a parallel region).
void thread_share(int n, int unit, int* first, int* last);
// Rows n0 .. n1−1 of y = x·Wᵀ (+ bias) on the calling thread: y[n] = Σ_k x[k]·W[n, k], summed in
// the same order as matmul() (decode and prefill), whichever thread computes them.
//   x: [K];  W: [N, K] in dtype wt;  y, bias: [N]
void matvec_range(float* y, const float* x, const void* W, DType wt, const float* bias, int K, int n0, int n1);
// x [K] made ready once for several matvec_range calls over the same x by the calling thread, as
// a decode step's thread takes a matrix's rows a few at a time: for q8_0 weights x is quantised
// once (into the thread's scratch: valid until the thread's next prepare_matvec_input or q8_0
// product), not once per call. Same results as matvec_range(y, x, …).
struct MatvecInput {
  const float* x;
  int K;
  DType wt;
  const int8_t* q8 = nullptr;  // q8_0: x quantised, and its block scales
  const float* q8_scales = nullptr;
};
MatvecInput prepare_matvec_input(const float* x, int K, DType wt);
// W in the dtype `in` was prepared for.
void matvec_range(float* y, const MatvecInput& in, const void* W, const float* bias, int n0, int n1);
// A few tokens' product (a batched decode step's) computed by the threads of the caller's region:
// x [M, K] made ready once per thread for weights of dtype wt (q8_0: quantised into the thread's
// scratch, valid until its next q8_0 product or prepare_*), then any rows n0 .. n1−1 of
// y[M, N] = x·Wᵀ (+ bias) for all M tokens, with the kernels of matmul()'s few-token products —
// the same bits as matmul() (and as each token's decode matvec), whichever thread computes a row.
// Ranges start at multiples of few_token_rows_unit() rows (whole tiles of every kernel).
// matmul() takes this path for products of 2 .. kFewTokens tokens worth sharing out.
constexpr int kFewTokens = 16;
struct FewTokenInput {
  const float* x;
  int M, K;
  DType wt;
  const int8_t* q8 = nullptr;  // q8_0: x quantised, and its block scales
  const float* q8_scales = nullptr;
};
FewTokenInput prepare_few_tokens(const float* x, int M, int K, DType wt);
void few_token_rows(float* y, const FewTokenInput& in, const void* W, const float* bias, int N, int n0, int n1);
int few_token_rows_unit();
// A hint, no effect on any result: starts fetching the first `bytes` of rows n0 .. n1−1 of W
// ([N, K] in dtype wt) from memory, for a thread that reads them next but first waits or computes
// (a barrier, attention), so that the memory bus stays busy meanwhile.
void prefetch_rows(const void* W, DType wt, int K, int n0, int n1, size_t bytes);

// --- memory bandwidth ----------------------------------------------------------------------------
// STREAM triad a[i] = b[i] + s·c[i] over arrays of `bytes_per_array` bytes with all threads;
// returns the best of `reps` runs in bytes/second (3 arrays moved per element: 2 read, 1 written —
// STREAM's count, which leaves out the read of a's lines before they are written).
double stream_triad_bandwidth(size_t bytes_per_array, int reps);

// A run of memory that a decode step reads: a weight matrix, one kv head's cached keys.
struct ByteRange {
  const void* data;
  size_t bytes;
};
// Their bytes in all.
double total_bytes(const std::vector<ByteRange>& ranges);
// Seconds all threads take to read every range once, each thread its share of each range (as a
// decode step splits each matrix's rows between them), with no work besides folding the words
// together: the fastest that a step reading exactly these bytes could go on this machine at this
// moment — the decode bound, when the ranges are the ones the step reads (Transformer::decode_reads).
// fold, if given, gets what the reads folded to (the same for any number of threads): the XOR of
// every 8-byte word of each range's whole 64-byte lines (the loads never straddle two lines,
// wherever the range starts) and of each byte before its first line boundary and after its last
// whole line.
double time_read_pass(const std::vector<ByteRange>& ranges, uint64_t* fold = nullptr);

}  // namespace orion::cpu
