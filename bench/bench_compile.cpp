// Compile speed: IR → MIL text + weight blob images for GPT-2 124M's whole program set
// — 12 layers × (prefill attention, prefill FFN, decode QKV, decode FFN) + final norm = 49
// programs — through compile_graph (standard pipeline incl. validation, then emission). Weight I/O
// is excluded: the weights are random fp16, the IR graphs are built once outside the timed loop,
// and the loop copies them (constant bytes are shared, not copied) before compiling.
//
//   bench_compile                                     the whole set, m4 (target: < 100 ms)
//   bench_compile --benchmark_filter=Kernel           one program of each kind, to see where time goes
//
// Results and commands: bench/COMPILE.md.
#include <benchmark/benchmark.h>

#include "compiler/compile.h"
#include "model/config.h"
#include "model/frontends/program_set.h"
#include "model/weights.h"

namespace {

using namespace orion;

constexpr int kSeq = 64;

struct ProgramSet {
  ModelWeights weights;
  std::vector<frontends::ProgramSpec> specs;
  std::vector<ir::Graph> graphs;
};

const ProgramSet& gpt2_124m() {
  static const ProgramSet set = [] {
    ProgramSet s;
    s.weights = random_weights(config_preset("gpt2-124m"), 1, DType::F16);
    const compiler::ChipProfile& chip = compiler::default_chip();  // the programs of generation with a kSeq prompt
    s.specs = frontends::inference_programs(s.weights, kSeq, frontends::inference_attention_bucket(s.weights, chip), chip);
    for (const auto& spec : s.specs) s.graphs.push_back(spec.build());
    return s;
  }();
  return set;
}

void compile_all(benchmark::State& state, const std::string& chip_name) {
  const ProgramSet& set = gpt2_124m();
  const compiler::ChipProfile& chip = compiler::chip_profile(chip_name);
  size_t mil_bytes = 0, blob_bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<ir::Graph> graphs = set.graphs;
    state.ResumeTiming();
    mil_bytes = blob_bytes = 0;
    for (ir::Graph& g : graphs) {
      compiler::CompileResult r = compiler::compile_graph(g, chip);
      mil_bytes += r.program.mil_text.size();
      for (const auto& [key, image] : r.program.weights) blob_bytes += image.size();
      benchmark::DoNotOptimize(r);
    }
  }
  state.counters["programs"] = double(set.graphs.size());
  state.counters["mil_bytes"] = double(mil_bytes);
  state.counters["blob_bytes"] = double(blob_bytes);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(blob_bytes));
}

void BM_CompileGpt2_124M(benchmark::State& state) { compile_all(state, "m4"); }
BENCHMARK(BM_CompileGpt2_124M)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

void BM_CompileGpt2_124M_M1(benchmark::State& state) { compile_all(state, "m1"); }
BENCHMARK(BM_CompileGpt2_124M_M1)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

// One program of layer 0 (by index in the set: 0 prefill_attn, 1 prefill_ffn, 2 decode_qkv,
// 3 decode_ffn), split into the pipeline alone and the whole compile.
void BM_Kernel(benchmark::State& state) {
  const ProgramSet& set = gpt2_124m();
  const ir::Graph& source = set.graphs[size_t(state.range(0))];
  state.SetLabel(set.specs[size_t(state.range(0))].name);
  for (auto _ : state) {
    state.PauseTiming();
    ir::Graph g = source;
    state.ResumeTiming();
    benchmark::DoNotOptimize(compiler::compile_graph(g, compiler::default_chip()));
  }
}
BENCHMARK(BM_Kernel)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
