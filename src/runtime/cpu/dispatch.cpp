// Threads, the choice of instruction set, and the kernels that split work over threads: matmul
// (decode here, prefill in gemm.cpp), attention and the STREAM triad.
//
// The instruction set is chosen once at start-up: the best the CPU supports (AVX-512, then
// AVX2+FMA+F16C, then portable C++), or the one named by the environment variable ORION_ISA
// (generic, avx2, avx512) when the CPU has it. set_isa() switches it later (tests compare them).
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cpuid.h>

#include "base/error.h"
#include "runtime/cpu/kernel_paths.h"
#include "runtime/cpu/kernels_impl.h"
#include "runtime/cpu/work_shares.h"
#include "runtime/cpu/kernels_q8.h"

namespace orion::cpu {
namespace {

// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}

bool cpu_has(Isa isa) {
  switch (isa) {
    case Isa::Generic: return true;
    case Isa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case Isa::Avx512:
      return cpu_has(Isa::Avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
}

const IsaKernels& table_of(Isa isa) {
  switch (isa) {
    case Isa::Generic: return kGenericKernels;
    case Isa::Avx2: return kAvx2Kernels;
    case Isa::Avx512: return kAvx512Kernels;
  }
  return kGenericKernels;
}

const IsaKernels* best_available() {
  for (Isa isa : {Isa::Avx512, Isa::Avx2})
    if (cpu_has(isa)) return &table_of(isa);
  return &kGenericKernels;
}

// What ORION_ISA asked for and could not have ("" when it is unset or honoured).
std::string g_refused;

const IsaKernels* choose_at_startup() {
  const char* env = std::getenv("ORION_ISA");
  if (!env || !*env) return best_available();
  for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512})
    if (std::strcmp(env, isa_name(isa)) == 0) {
      if (cpu_has(isa)) return &table_of(isa);
      g_refused = std::string("ORION_ISA=") + env + ": this CPU lacks it";
      return best_available();
    }
  g_refused = std::string("ORION_ISA=") + env + ": not an instruction set (generic, avx2, avx512)";
  return best_available();
}

const IsaKernels* g_kernels = choose_at_startup();

bool cpu_is_amd() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4), std::memcpy(vendor + 4, &d, 4), std::memcpy(vendor + 8, &c, 4);
  return std::strcmp(vendor, "AuthenticAMD") == 0;
}

// ORION_MATVEC=rows|blocks, else the vendor's measured best (kernels.h). An unknown value is
// ignored: the order never changes a result, only the speed.
MatvecOrder matvec_order_at_startup() {
  const char* env = std::getenv("ORION_MATVEC");
  for (MatvecOrder o : {MatvecOrder::RowByRow, MatvecOrder::RowBlocks})
    if (env && std::strcmp(env, matvec_order_name(o)) == 0) return o;
  return cpu_is_amd() ? MatvecOrder::RowByRow : MatvecOrder::RowBlocks;
}

MatvecOrder g_matvec_order = matvec_order_at_startup();

}  // namespace

// --- threads and instruction set ---------------------------------------------------------------

void set_num_threads(int n) { omp_set_num_threads(n > 0 ? n : omp_get_num_procs()); }
int num_threads() { return omp_get_max_threads(); }

const IsaKernels& isa_kernels() { return *g_kernels; }
Isa active_isa() { return g_kernels->isa; }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Generic: return "generic";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

const std::string& isa_request_refused() { return g_refused; }

bool set_isa(Isa isa) {
  if (!cpu_has(isa)) return false;
  g_kernels = &table_of(isa);
  return true;
}

MatvecOrder matvec_order() { return g_matvec_order; }
void set_matvec_order(MatvecOrder order) { g_matvec_order = order; }
const char* matvec_order_name(MatvecOrder order) { return order == MatvecOrder::RowByRow ? "rows" : "blocks"; }

// --- matmul --------------------------------------------------------------------------------------

void thread_share(int n, int unit, int* first, int* last) {
  const int nt = omp_get_num_threads(), t = omp_get_thread_num();
  const int units = (n + unit - 1) / unit;
  *first = std::min(n, units * t / nt * unit);
  *last = std::min(n, units * (t + 1) / nt * unit);
}

void matvec_range(float* y, const float* x, const void* W, DType wt, const float* bias, int K, int n0, int n1) {
  g_kernels->matvec_rows(y, x, W, wt, bias, K, n0, n1);
}

MatvecInput prepare_matvec_input(const float* x, int K, DType wt) {
  MatvecInput in{x, K, wt};
  if (wt == DType::Q8_0) {
    const Q8Activations a = quantize_activations(x, 1, K);
    in.q8 = a.q, in.q8_scales = a.d;
  }
  return in;
}

void matvec_range(float* y, const MatvecInput& in, const void* W, const float* bias, int n0, int n1) {
  if (in.wt == DType::Q8_0) return g_kernels->q8_matvec_quantized(y, in.q8, in.q8_scales, W, bias, in.K, n0, n1);
  g_kernels->matvec_rows(y, in.x, W, in.wt, bias, in.K, n0, n1);
}

// Asks for the 64-byte lines of [p, p + bytes) to be brought into L2 (prefetcht1).
static void prefetch_to_l2(const void* p, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 64) {
    __builtin_prefetch(static_cast<const char*>(p) + i, 0, 2);
    // GCC counts a prefetch as no effect and deleted such a loop, once inlined, as dead code; an
    // (empty) volatile asm is an effect it must keep.
    asm volatile("");
  }
}

void prefetch_rows(const void* W, DType wt, int K, int n0, int n1, size_t bytes) {
  if (n0 >= n1) return;
  const char* p = static_cast<const char*>(W) + dtype_bytes(wt, size_t(n0) * K);
  prefetch_to_l2(p, std::min(bytes, dtype_bytes(wt, size_t(n1 - n0) * K)));
}

// y[M, N] = x[M, K]·W[N, K]ᵀ (+ bias). Decode (M == 1) splits the N output rows into one
// contiguous range per thread, in units of BLOCK rows, so each thread streams its own part of W
// exactly once. Which thread computes a row never changes how the row is summed.
void matmul(float* y, const float* x, const void* W, DType wt, const float* bias, int M, int K, int N) {
  if (use_library_gemm(wt, M)) return matmul_library(y, x, W, wt, bias, M, K, N);
  if (M > 1) return matmul_prefill(y, x, W, wt, bias, M, K, N);
  constexpr int BLOCK = 16;  // a multiple of every ISA's row step
  const IsaKernels& ker = *g_kernels;
  const bool big = dtype_bytes(wt, size_t(N) * K) >= (64u << 10);  // smaller: not worth waking threads
#pragma omp parallel if (big)
  {
    int n0, n1;
    thread_share(N, BLOCK, &n0, &n1);
    ker.matvec_rows(y, x, W, wt, bias, K, n0, n1);
  }
}

// --- attention -----------------------------------------------------------------------------------

void attention_head(float* out, const float* q, const void* k, const void* v, int len, int head_dim, int kv_stride,
                    float* att, DType kv_dtype) {
  const IsaKernels& ker = *g_kernels;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  if (kv_dtype == DType::F16) {
    ker.scores_f16(att, q, static_cast<const uint16_t*>(k), len, head_dim, kv_stride, scale);
    softmax_inplace(att, len);
    ker.weighted_sum_f16(out, att, static_cast<const uint16_t*>(v), len, head_dim, kv_stride);
    return;
  }
  ORION_CHECK(kv_dtype == DType::F32, "attention: a KV cache holds f32 or f16");
  ker.scores(att, q, static_cast<const float*>(k), len, head_dim, kv_stride, scale);
  softmax_inplace(att, len);
  ker.weighted_sum(out, att, static_cast<const float*>(v), len, head_dim, kv_stride);
}

void KvLayout::store(void* cache, int pos, const float* row, int c0, int c1) const {
  for (int c = c0; c < c1;) {  // one run of channels per kv head
    const int head = c / head_dim, i = c % head_dim, n = std::min(c1 - c, head_dim - i);
    const size_t e = at(head, pos) + size_t(i);
    if (dtype == DType::F16)
      for (int j = 0; j < n; j++) static_cast<uint16_t*>(cache)[e + size_t(j)] = f32_to_f16(row[c + j]);
    else std::copy(row + c, row + c + n, static_cast<float*>(cache) + e);
    c += n;
  }
}

// Query head h of the token at position pos (window: see attention_start): attention_head over
// the positions it sees. With grouped-query attention, NH/NKV consecutive query heads share kv head
// kvh = h / (NH/NKV).
static void attention_task(float* out, const float* q, const void* k, const void* v, int pos, int h, int group,
                           const KvLayout& kv, int window, float* scratch) {
  const int HS = kv.head_dim, first = attention_start(pos, window), len = pos + 1 - first;
  attention_head(out + size_t(h) * HS, q + size_t(h) * HS, kv.address(k, h / group, first), kv.address(v, h / group, first),
                 len, HS, int(kv.pos_stride), scratch, kv.dtype);
}

// For each new token t and head h (one task each, spread over threads), attention_task.
void attention(float* out, const float* q, const void* k, const void* v, int T, int pos0, int n_heads, int n_kv_heads,
               const KvLayout& kv, int window) {
  const int group = n_heads / n_kv_heads, Q = n_heads * kv.head_dim;
  const int tasks = T * n_heads;
#pragma omp parallel if (tasks > 1)
  {
    std::vector<float> att(size_t(pos0 + T));  // scores of one (t, h), reused by this thread
    // Round-robin: later tokens attend to more positions, so interleave them over threads.
#pragma omp for schedule(static, 1)
    for (int task = 0; task < tasks; task++) {
      const int t = task / n_heads, h = task % n_heads;
      attention_task(out + size_t(t) * Q, q + size_t(t) * Q, k, v, pos0 + t, h, group, kv, window, att.data());
    }
  }
}

void prefetch_kv_head(const KvLayout& kv, const void* k, const void* v, int head, int first, int len) {
  // At most the first 128 KB of each: a long context's would evict each other from L2; once its
  // reads begin, the hardware prefetchers follow the rest.
  constexpr size_t kMaxBytes = 128 << 10;
  len = int(std::min(size_t(len), kMaxBytes / (size_t(kv.head_dim) * kv.elem_bytes())));
  const size_t run = kv.pos_stride == size_t(kv.head_dim) ? size_t(len) : 1;  // positions per contiguous run
  const size_t run_bytes = run * size_t(kv.head_dim) * kv.elem_bytes();
  for (int p = first; p < first + len; p += int(run)) {
    prefetch_to_l2(kv.address(k, head, p), run_bytes);
    prefetch_to_l2(kv.address(v, head, p), run_bytes);
  }
}

// Every row of a batched decode step attends to its own sequence's cache, so a thread's next task
// reads memory its current one does not: each thread asks for its next task's keys and values
// before it starts the current one, and they arrive while it computes (a task is a few tens of KB
// read in two short runs, too short for the hardware prefetchers to reach full speed: 8 rows at
// position 160, 12 heads of 64, f32 cache from memory, 27–29 → 33–37 GB/s on the Zen 5 VM).
// A task is one kv head of one row with all its query heads (grouped-query attention: NH/NKV
// heads read the same keys and values, from L2 after the first) — one task per query head, shared
// out round-robin, had both threads read every kv head from memory.
void attention_rows_in_team(const AttentionRow* rows, int B, int n_heads, int n_kv_heads, const KvLayout& kv, int window) {
  const int group = n_heads / n_kv_heads, tasks = B * n_kv_heads;
  int longest = 0;
  for (int b = 0; b < B; b++) longest = std::max(longest, rows[b].pos + 1);
  std::vector<float> att(static_cast<size_t>(longest));
  // Round-robin, as schedule(static, 1): this thread's next task is task + threads.
  const int threads = omp_get_num_threads();
  for (int task = omp_get_thread_num(); task < tasks; task += threads) {
    if (const int next = task + threads; next < tasks) {
      const AttentionRow& n = rows[next / n_kv_heads];
      const int first = attention_start(n.pos, window);
      prefetch_kv_head(kv, n.k, n.v, next % n_kv_heads, first, n.pos + 1 - first);
    }
    const AttentionRow& r = rows[task / n_kv_heads];
    const int g = task % n_kv_heads;
    for (int h = g * group; h < (g + 1) * group; h++)
      attention_task(r.out, r.q, r.k, r.v, r.pos, h, group, kv, window, att.data());
  }
}

void attention_rows(const AttentionRow* rows, int B, int n_heads, int n_kv_heads, const KvLayout& kv, int window) {
#pragma omp parallel if (B * n_kv_heads > 1)  // one task per (row, kv head)
  attention_rows_in_team(rows, B, n_heads, n_kv_heads, kv, window);
}

bool cpu_has_avx_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
}
bool cpu_has_avx512_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11)) != 0;
}

bool vnni_allowed() {
  static const bool allowed = [] {
    const char* env = std::getenv("ORION_VNNI");
    return !(env && std::strcmp(env, "off") == 0);
  }();
  return allowed;
}

std::vector<CpuFeature> cpu_features() {
  const bool avx512_vnni = cpu_has_avx512_vnni(), avx_vnni = cpu_has_avx_vnni();
  return {{"avx2", bool(__builtin_cpu_supports("avx2"))},
          {"fma", bool(__builtin_cpu_supports("fma"))},
          {"f16c", has_f16c()},
          {"avx512f", bool(__builtin_cpu_supports("avx512f"))},
          {"avx512bw", bool(__builtin_cpu_supports("avx512bw"))},
          {"avx512vl", bool(__builtin_cpu_supports("avx512vl"))},
          {"avx512dq", bool(__builtin_cpu_supports("avx512dq"))},
          {"avx512_vnni", avx512_vnni},
          {"avx_vnni", avx_vnni}};
}

// --- memory bandwidth ----------------------------------------------------------------------------

// STREAM triad a = b + s·c with ordinary (cached) stores, as gcc compiles stream.c: 2 arrays read,
// 1 written, counted as 3·n·4 bytes. The arrays come from the allocator the weights come from (2 MB
// pages where the kernel gives them), so the bound and the decode it bounds see the same pages.
double stream_triad_bandwidth(size_t bytes_per_array, int reps) {
  const size_t n = std::max<size_t>(bytes_per_array / sizeof(float) / 16 * 16, 16);
  float* __restrict a = static_cast<float*>(allocate_zeroed(n * 4, "the bandwidth measurement"));
  float* __restrict b = static_cast<float*>(allocate_zeroed(n * 4, "the bandwidth measurement"));
  float* __restrict c = static_cast<float*>(allocate_zeroed(n * 4, "the bandwidth measurement"));
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2;
  double best = 0;
  for (int r = 0; r < std::max(reps, 1); r++) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 3.0 * double(n) * 4 / s);
  }
  std::free(a), std::free(b), std::free(c);
  return best;
}

namespace {
std::atomic<uint64_t> g_read_sink{0};  // what the passes folded to: kept so the compiler cannot drop the reads
}

double total_bytes(const std::vector<ByteRange>& ranges) {
  double bytes = 0;
  for (const ByteRange& r : ranges) bytes += double(r.bytes);
  return bytes;
}

// A range as the pass reads it: its whole 64-byte lines as 8-byte words, from the first line
// boundary inside it, and the bytes before that boundary (head) and after its last whole line.
struct LineSpan {
  const char* lines;
  size_t words, head;
  static LineSpan of(const ByteRange& r) {
    const auto at = reinterpret_cast<uintptr_t>(r.data);
    const size_t head = std::min(r.bytes, size_t((64 - at % 64) % 64));
    return {static_cast<const char*>(r.data) + head, (r.bytes - head) / 64 * 8, head};
  }
};

double time_read_pass(const std::vector<ByteRange>& ranges, uint64_t* fold) {
  const IsaKernels& ker = *g_kernels;
  // Each range's whole lines in units of 8 KB, shared out as a decode step shares a matrix's rows
  // (WorkShares: each thread its own run of the range front to back, then units stolen from the
  // back of the others'), so that a slower core holds the pass back no more than it holds a decode
  // step back. (A split of the ranges' concatenation instead — each thread half of all the bytes
  // — read 10–15% slower on the Zen 5 VM.) The loads start on a line boundary whatever the range's
  // address: 64-byte loads from 32 bytes past one (every tensor of a GGUF file aligned to 32, the
  // format's default) each straddle two lines, and such a pass read 47–50 GB/s where the same bytes
  // on line boundaries read 57–67 — a bound below what the decode itself reached on those weights.
  constexpr size_t kUnitWords = 1024;
  std::vector<WorkShares> shares(ranges.size());
  std::vector<LineSpan> spans(ranges.size());
  for (size_t i = 0; i < ranges.size(); i++) spans[i] = LineSpan::of(ranges[i]);
  uint64_t folded = 0;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(^ : folded)
  {
#pragma omp single
    for (size_t i = 0; i < ranges.size(); i++) {
      ORION_CHECK(spans[i].words < size_t(1) << 31, "time_read_pass: a range of {} bytes", ranges[i].bytes);
      shares[i].reset(int(spans[i].words), int(kUnitWords), omp_get_num_threads());
    }  // (implicit barrier)
    for (size_t i = 0; i < ranges.size(); i++) {
      int w0, w1;
      while (shares[i].next(8, &w0, &w1)) folded ^= ker.read_fold(spans[i].lines + 8 * size_t(w0), size_t(w1 - w0));
    }
#pragma omp single nowait
    for (size_t i = 0; i < ranges.size(); i++) {  // the bytes before each range's first line and after its last
      const char* p = static_cast<const char*>(ranges[i].data);
      const size_t after = spans[i].head + spans[i].words * 8;
      for (size_t j = 0; j < spans[i].head; j++) folded ^= uint8_t(p[j]);
      for (size_t j = after; j < ranges[i].bytes; j++) folded ^= uint8_t(p[j]);
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g_read_sink.fetch_xor(folded, std::memory_order_relaxed);
  if (fold) *fold = folded;
  return s;
}

}  // namespace orion::cpu
