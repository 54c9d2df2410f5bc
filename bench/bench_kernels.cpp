// Speed of the CPU kernels (runtime/cpu/kernels.h), Google Benchmark.
//
//   bench_kernels --benchmark_filter=Decode     decode matvec, bytes/s of W and % of STREAM triad
//                                               (DecodeArithmetic: one thread, W in cache)
//   bench_kernels --benchmark_filter=Prefill    prefill matmul, FLOP/s (and OpenBLAS sgemm beside it)
//   bench_kernels --benchmark_filter=Attention  attention over a KV cache
//   bench_kernels --benchmark_filter=Stream     STREAM triad
//
// Decode reads W from memory, not from cache: each iteration uses the next of many copies of W
// spread over a 768 MB buffer (this machine's L3 is 260 MB), as a model's layers do.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "base/line_aligned.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/kernels_q8.h"  // set_avx2_vnni / set_avx512_vnni

namespace {

using orion::DType;
namespace cpu = orion::cpu;

constexpr size_t kPoolBytes = 768u << 20;  // > 2 × L3, so no copy of W is still cached when reused

// The STREAM triad figure every decode result is compared with (measured once, best of 10).
double triad_bytes_per_s() {
  static const double bw = cpu::stream_triad_bandwidth(256u << 20, 10);
  return bw;
}

// A 768 MB pool of weights of dtype dt with values in ±[0.5, 1) (no subnormals, no NaN).
uint8_t* weight_pool(DType dt) {
  static uint8_t* pool = static_cast<uint8_t*>(std::aligned_alloc(64, kPoolBytes));
  static DType filled = DType(255);
  if (filled != dt) {
    // 64 KB of random values, repeated over the pool.
    std::mt19937 rng(1);
    const size_t tile = 64u << 10, n = tile / orion::dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
      const float v = (rng() & 1 ? 1.0f : -1.0f) * (0.5f + float(rng() % 1000) / 2000.0f);
      if (dt == DType::F32) std::memcpy(pool + 4 * i, &v, 4);
      const uint16_t h = dt == DType::F16 ? orion::f32_to_f16(v) : orion::f32_to_bf16(v);
      if (dt != DType::F32) std::memcpy(pool + 2 * i, &h, 2);
    }
    for (size_t off = tile; off < kPoolBytes; off += tile) std::memcpy(pool + off, pool, tile);
    filled = dt;
  }
  return pool;
}

const DType kDtypes[] = {DType::F32, DType::F16, DType::BF16};
const cpu::Isa kIsas[] = {cpu::Isa::Generic, cpu::Isa::Avx2, cpu::Isa::Avx512};

// Args: K, N, dtype index, isa index. y[N] = x[K]·Wᵀ with W read from memory.
void BM_Decode(benchmark::State& st) {
  const int K = int(st.range(0)), N = int(st.range(1));
  const DType dt = kDtypes[st.range(2)];
  if (!cpu::set_isa(kIsas[st.range(3)])) return st.SkipWithError("ISA not available");
  const size_t bytes = (size_t(N) * K * orion::dtype_size(dt) + 63) / 64 * 64;
  const size_t copies = kPoolBytes / bytes;
  const uint8_t* pool = weight_pool(dt);
  std::vector<float> x(size_t(K), 0.01f), y(size_t(N), 0.0f);
  const double triad = triad_bytes_per_s();
  size_t i = 0;
  for (auto _ : st) {
    cpu::matmul(y.data(), x.data(), pool + (i++ % copies) * bytes, dt, nullptr, 1, K, N);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(size_t(N) * K * orion::dtype_size(dt)));
  st.counters["pct_of_triad"] = benchmark::Counter(100.0 * double(size_t(N) * K * orion::dtype_size(dt)) / triad,
                                                   benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(std::string(orion::dtype_name(dt)) + " " + cpu::isa_name(kIsas[st.range(3)]));
  cpu::set_isa(cpu::Isa::Avx512) || cpu::set_isa(cpu::Isa::Avx2);
}

void decode_args(benchmark::internal::Benchmark* b) {
  const int shapes[][2] = {{768, 768}, {768, 2048}, {2048, 768}, {768, 32000}};  // Stories110M: K → N
  for (int d = 0; d < 3; d++)
    for (int isa = 2; isa >= 0; isa--)
      for (auto& s : shapes) b->Args({s[0], s[1], d, isa});
}
BENCHMARK(BM_Decode)->Apply(decode_args)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Args: K, dtype index (0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q8_0 with VNNI switched off — the path of
// a CPU without AVX-VNNI / AVX512-VNNI), isa index. One thread, one matrix of ~192
// KB (in L2) multiplied again and again with the decode's own row loop (cpu::matvec_range, in the
// order matvec_order() picks): how fast the kernel's arithmetic alone goes, in bytes of W a second.
// A decode step can only reach the memory bandwidth if this is well above a core's share of it
// (bench/RESULTS.md: on the Zen 5 VM one row at a time computes at 43–51 GB/s with the AVX-512
// kernels and 15–24 with the AVX2 ones; a core's share of memory there is ~30–35).
void BM_DecodeArithmetic(benchmark::State& st) {
  const int K = int(st.range(0));
  const DType dt = st.range(1) >= 3 ? DType::Q8_0 : kDtypes[st.range(1)];
  if (!cpu::set_isa(kIsas[st.range(2)])) return st.SkipWithError("ISA not available");
  const bool avx2_vnni = cpu::set_avx2_vnni(st.range(1) != 4), avx512_vnni = cpu::set_avx512_vnni(st.range(1) != 4);
  const bool vnni = kIsas[st.range(2)] == cpu::Isa::Avx512 ? avx512_vnni : avx2_vnni;
  const int N = int((192u << 10) / orion::dtype_bytes(dt, size_t(K)));
  std::vector<float> w(size_t(N) * K), x(static_cast<size_t>(K)), y(static_cast<size_t>(N));
  for (size_t i = 0; i < w.size(); i++) w[i] = float(int(i * 7919 % 2001) - 1000) / 1000.0f;
  for (size_t i = 0; i < x.size(); i++) x[i] = float(int(i * 104729 % 2001) - 1000) / 1000.0f;
  std::vector<uint8_t> W(orion::dtype_bytes(dt, w.size()));
  orion::convert_dtype(w.data(), DType::F32, W.data(), dt, w.size());
  const cpu::MatvecInput in = cpu::prepare_matvec_input(x.data(), K, dt);
  for (auto _ : st) {
    cpu::matvec_range(y.data(), in, W.data(), nullptr, 0, N);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(W.size()));
  st.SetLabel(std::string(orion::dtype_name(dt)) + (dt == DType::Q8_0 && !vnni ? " (no VNNI)" : "") +
              " " + cpu::isa_name(kIsas[st.range(2)]) + " " +
              (cpu::matvec_order() == cpu::MatvecOrder::RowByRow ? "row by row" : "row blocks"));
  cpu::set_avx2_vnni(true), cpu::set_avx512_vnni(true);  // (each stays off where the CPU lacks it)
  cpu::set_isa(cpu::Isa::Avx512) || cpu::set_isa(cpu::Isa::Avx2);
}
BENCHMARK(BM_DecodeArithmetic)
    ->ArgsProduct({{768, 2048}, {1, 3, 4, 0, 2}, {2, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Args: K, N, isa index (1 avx2, 2 avx512), whether W stays in cache (1) or is read from memory (0).
// y[N] = x[K]·Wᵀ with q8_0 weights: from memory it is BM_Decode for q8_0 (1.0625 bytes a weight);
// in cache it shows how fast the kernel's arithmetic alone goes.
void BM_DecodeQ8(benchmark::State& st) {
  const int K = int(st.range(0)), N = int(st.range(1));
  const bool cached = st.range(3) != 0;
  if (!cpu::set_isa(kIsas[st.range(2)])) return st.SkipWithError("ISA not available");
  const size_t bytes = orion::dtype_bytes(DType::Q8_0, size_t(N) * K);
  static std::vector<uint8_t> pool;  // copies of one matrix, kPoolBytes in all
  static size_t pool_matrix = 0;
  if (pool_matrix != bytes) {
    std::vector<float> w(size_t(N) * K);
    for (size_t i = 0; i < w.size(); i++) w[i] = float(int(i * 7919 % 2001) - 1000) / 1000.0f;
    pool.assign(kPoolBytes / bytes * bytes, 0);
    orion::quantize_q8_0(w.data(), reinterpret_cast<orion::BlockQ8_0*>(pool.data()), w.size());
    for (size_t off = bytes; off < pool.size(); off += bytes) std::memcpy(pool.data() + off, pool.data(), bytes);
    pool_matrix = bytes;
  }
  const size_t copies = cached ? 1 : pool.size() / bytes;
  std::vector<float> x(static_cast<size_t>(K)), y(static_cast<size_t>(N));
  for (int i = 0; i < K; i++) x[static_cast<size_t>(i)] = float(i % 17) / 17.0f - 0.5f;
  const double triad = triad_bytes_per_s();
  size_t i = 0;
  for (auto _ : st) {
    cpu::matmul(y.data(), x.data(), pool.data() + (i++ % copies) * bytes, DType::Q8_0, nullptr, 1, K, N);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(bytes));
  st.counters["pct_of_triad"] =
      benchmark::Counter(100.0 * double(bytes) / triad, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(std::string(cpu::isa_name(kIsas[st.range(2)])) + (cached ? " cached" : " memory"));
  cpu::set_isa(cpu::Isa::Avx512) || cpu::set_isa(cpu::Isa::Avx2);
}
BENCHMARK(BM_DecodeQ8)
    ->ArgsProduct({{768}, {2048}, {2, 1}, {0, 1}})
    ->Args({768, 32000, 2, 0})
    ->Args({2048, 768, 2, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Args: M, K, N, dtype index. y[M, N] = x[M, K]·Wᵀ, W in cache after the first call.
void BM_Prefill(benchmark::State& st) {
  const int M = int(st.range(0)), K = int(st.range(1)), N = int(st.range(2));
  const DType dt = kDtypes[st.range(3)];
  const uint8_t* W = weight_pool(dt);
  orion::LineAlignedVector<float> x(size_t(M) * K, 0.01f), y(size_t(M) * N, 0.0f);
  for (auto _ : st) {
    cpu::matmul(y.data(), x.data(), W, dt, nullptr, M, K, N);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["GFLOPS"] = benchmark::Counter(2.0 * M * K * N / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(std::string(orion::dtype_name(dt)) + " " + cpu::isa_name(cpu::active_isa()));
}
BENCHMARK(BM_Prefill)
    ->ArgsProduct({{64, 128, 256}, {768}, {2048}, {0, 1, 2}})
    ->Args({128, 768, 768, 0})
    ->Args({128, 2048, 768, 0})
    ->Args({128, 2048, 768, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The same product through OpenBLAS sgemm (f32 only), to compare with BM_Prefill.
// Args: M, isa index (1 avx2, 2 avx512). y[M, 2048] = x[M, 768]·Wᵀ with q8_0 weights (in cache
// after the first call): the int8 tiles of each ISA.
void BM_PrefillQ8(benchmark::State& st) {
  const int M = int(st.range(0)), K = 768, N = 2048;
  if (!cpu::set_isa(kIsas[st.range(1)])) return st.SkipWithError("ISA not available");
  std::vector<float> w(size_t(N) * K), x(size_t(M) * K), y(size_t(M) * N);
  for (size_t i = 0; i < w.size(); i++) w[i] = float(int(i * 7919 % 2001) - 1000) / 1000.0f;
  for (size_t i = 0; i < x.size(); i++) x[i] = float(int(i * 104729 % 2001) - 1000) / 1000.0f;
  std::vector<orion::BlockQ8_0> q(w.size() / 32);
  orion::quantize_q8_0(w.data(), q.data(), w.size());
  for (auto _ : st) {
    cpu::matmul(y.data(), x.data(), q.data(), DType::Q8_0, nullptr, M, K, N);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["GFLOPS"] = benchmark::Counter(2.0 * M * K * N / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(cpu::isa_name(kIsas[st.range(1)]));
  cpu::set_isa(cpu::Isa::Avx512) || cpu::set_isa(cpu::Isa::Avx2);
}
BENCHMARK(BM_PrefillQ8)->ArgsProduct({{256}, {1, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_PrefillOpenBlas(benchmark::State& st) {
  const int M = int(st.range(0)), K = int(st.range(1)), N = int(st.range(2));
  openblas_set_num_threads(cpu::num_threads());
  const float* W = reinterpret_cast<const float*>(weight_pool(DType::F32));
  std::vector<float> x(size_t(M) * K, 0.01f), y(size_t(M) * N, 0.0f);
  for (auto _ : st) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x.data(), K, W, K, 0.0f, y.data(), N);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["GFLOPS"] = benchmark::Counter(2.0 * M * K * N / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(openblas_get_corename());
}
BENCHMARK(BM_PrefillOpenBlas)->ArgsProduct({{64, 128, 256}, {768}, {2048}})->UseRealTime()->Unit(benchmark::kMillisecond);

// Args: T new tokens, pos0 cached positions, the cache's layout (0: a row per position, 1: head by
// head, as KvCache keeps it), its elements (0: f32, 1: f16). Stories110M heads: 12 × 64. A decode
// step's attention reads the cache of all 12 layers (here 12 copies, ~60 MB of f32 at 1023 positions)
// after the weights pushed it out of the caches.
void BM_Attention(benchmark::State& st) {
  const int T = int(st.range(0)), pos0 = int(st.range(1)), NH = 12, HS = 64, D = NH * HS, L = pos0 + T, layers = 12;
  const DType dt = st.range(3) ? DType::F16 : DType::F32;
  const cpu::KvLayout kv = st.range(2) ? cpu::KvLayout::heads(L, HS, dt) : cpu::KvLayout::rows(D, HS, dt);
  const size_t per_layer = size_t(L) * D, bytes = per_layer * kv.elem_bytes();
  std::vector<float> q(size_t(T) * D, 0.1f), out(q.size());
  std::vector<char> k, v;  // on huge pages, as KvCache keeps them
  orion::assign_on_huge_pages(k, layers * bytes), orion::assign_on_huge_pages(v, layers * bytes);
  std::vector<float> k_row(D, 0.2f), v_row(D, 0.3f);
  for (int l = 0; l < layers; l++)
    for (int p = 0; p < L; p++) kv.store(k.data() + l * bytes, p, k_row.data(), 0, D), kv.store(v.data() + l * bytes, p, v_row.data(), 0, D);
  for (auto _ : st) {
    for (int l = 0; l < layers; l++)
      cpu::attention(out.data(), q.data(), k.data() + l * bytes, v.data() + l * bytes, T, pos0, NH, NH, kv);
    benchmark::DoNotOptimize(out.data());
  }
  // Bytes of K and V read per call: every token reads the cache up to its own position.
  const double kv_bytes = layers * 2.0 * double(kv.elem_bytes()) * D * (double(T) * pos0 + double(T) * (T + 1) / 2);
  st.SetBytesProcessed(int64_t(double(st.iterations()) * kv_bytes));
  st.SetLabel(std::string(st.range(2) ? "heads" : "rows") + (st.range(3) ? " f16" : " f32"));
}
BENCHMARK(BM_Attention)
    ->ArgsProduct({{1}, {255, 1023}, {0, 1}, {0, 1}})
    ->Args({64, 0, 0, 0})
    ->Args({256, 0, 0, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_StreamTriad(benchmark::State& st) {
  double bw = 0;
  for (auto _ : st) bw = cpu::stream_triad_bandwidth(size_t(st.range(0)) << 20, 10);
  st.counters["GB_per_s"] = bw / 1e9;
  st.SetLabel(std::to_string(cpu::num_threads()) + " threads");
}
BENCHMARK(BM_StreamTriad)->Arg(256)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
