// anesim's timing model (anesim_timing.cpp), term by term: utilisation, dispatch-dominated tiny
// programs, compute-bound deep ones, weight streaming from DRAM (cold programs, and beyond SRAM),
// faster chips faster, compile and load, and counters that add up. The model against public
// figures: test_anesim_public_figures.cpp.
#include <gtest/gtest.h>

#include "anesim_test_util.h"

namespace orion::runtime::anesim {
namespace {

using ir::ElemType;
using ir::Graph;
using ir::Op;

const compiler::ChipProfile& m4() { return compiler::chip_profile("m4"); }

TEST(anesim_Timing, UtilisationRampsToNinetyFourPercentAtSixteenOps) {
  EXPECT_EQ(utilisation(0), 0.0);
  EXPECT_LT(utilisation(1), 0.5);  // a one-op program keeps few of the cores busy
  for (int n = 1; n < 100; n++) EXPECT_LE(utilisation(n), utilisation(n + 1)) << n;
  EXPECT_DOUBLE_EQ(utilisation(16), 0.94);
  EXPECT_DOUBLE_EQ(utilisation(64), 0.94);
}

TEST(anesim_Timing, TinyProgramsAreDispatchBoundDeepOnesComputeBound) {
  ProgramCost tiny{1e5, 1, 1 << 20, 0};  // 100 kFLOP, one op
  TimingBreakdown t = predict_evaluation(tiny, m4());
  EXPECT_DOUBLE_EQ(t.dispatch_ms, 0.095);
  EXPECT_GT(t.dispatch_ms, 10 * t.compute_ms);
  // GPT-2 124M's FFN at S = 1024: 2 convs of 768×3072 = 9.7 GFLOP in a 20-op program at 94% of
  // 19 TFLOPS ≈ 0.54 ms of compute.
  ProgramCost ffn{2.0 * 2 * 768 * 3072 * 1024, 20, 16 << 20, 0};
  t = predict_evaluation(ffn, m4());
  EXPECT_NEAR(t.compute_ms, ffn.flops / (19e9 * 0.94), 1e-9);
  EXPECT_GT(t.compute_ms, 0.4);
  EXPECT_LT(t.compute_ms, 0.7);
  EXPECT_GT(t.compute_ms, 5 * t.dispatch_ms);
}

TEST(anesim_Timing, MonotoneInFlopsBytesAndWorkingSet) {
  double last = 0;
  for (double flops : {1e6, 1e8, 1e9, 1e10}) {
    const double ms = predict_evaluation({flops, 20, 1 << 20, 1 << 20}, m4()).total_ms;
    EXPECT_GT(ms, last) << flops;
    last = ms;
  }
  const double small = predict_evaluation({1e9, 20, 1 << 20, 1 << 20}, m4()).total_ms;
  const double more_io = predict_evaluation({1e9, 20, 1 << 20, 4 << 20}, m4()).total_ms;
  EXPECT_NEAR(more_io - small, surface_copy_ms(3 << 20, chip_timing(m4())), 1e-9);
  EXPECT_NEAR(surface_copy_ms(3 << 20, chip_timing(m4())), double(3 << 20) / (chip_timing(m4()).host_copy_gbps * 1e6),
              1e-12);
}

TEST(anesim_Timing, ColdProgramsFetchTheirWeightsResidentOnesDoNot) {
  // 16 MB of weights, little compute: memory-bound when cold, dispatch + compute when resident.
  const ProgramCost c{1e8, 20, 17 << 20, 1 << 20, 16 << 20};
  const TimingBreakdown cold = predict_evaluation(c, m4(), false), warm = predict_evaluation(c, m4(), true);
  EXPECT_EQ(cold.dram_bytes, 16 << 20);
  EXPECT_NEAR(cold.memory_ms, double(16 << 20) / (chip_timing(m4()).dram_gbps * 1e6), 1e-12);
  EXPECT_GT(cold.memory_ms, cold.compute_ms);
  EXPECT_NEAR(cold.total_ms, cold.dispatch_ms + cold.memory_ms + cold.copy_ms, 1e-12);
  EXPECT_EQ(warm.dram_bytes, 0);
  EXPECT_NEAR(warm.total_ms, warm.dispatch_ms + warm.compute_ms + warm.copy_ms, 1e-12);
  // Compute and streaming overlap: the slower of the two counts, not their sum.
  const ProgramCost heavy{2e10, 32, 17 << 20, 0, 16 << 20};
  const TimingBreakdown h = predict_evaluation(heavy, m4(), false);
  EXPECT_GT(h.compute_ms, h.memory_ms);
  EXPECT_NEAR(h.total_ms, h.dispatch_ms + h.compute_ms, 1e-12);
}

TEST(anesim_Timing, StreamingKicksInAboveSram) {
  // A resident program: nothing streams while its working set fits, the excess streams beyond.
  const int64_t sram = m4().sram_bytes;
  const ProgramCost fits{1e9, 32, sram, 0, sram - (1 << 20)}, beyond{1e9, 32, sram + (8 << 20), 0, sram + (7 << 20)};
  const TimingBreakdown a = predict_evaluation(fits, m4(), true), b = predict_evaluation(beyond, m4(), true);
  EXPECT_FALSE(a.over_sram);
  EXPECT_EQ(a.dram_bytes, 0);
  EXPECT_TRUE(b.over_sram);
  EXPECT_EQ(b.dram_bytes, 8 << 20);  // the weights that do not fit, fetched on every evaluation
  EXPECT_GT(b.total_ms, a.total_ms);
  // Activations alone beyond SRAM are written out and read back.
  const ProgramCost spill{1e9, 32, sram + (4 << 20), 0, 0};
  EXPECT_EQ(predict_evaluation(spill, m4(), true).dram_bytes, 2 * (4 << 20));
  // Streaming costs less on a chip whose ANE reaches more DRAM bandwidth.
  ChipTiming faster_dram = chip_timing(m4());
  faster_dram.dram_gbps *= 2;
  EXPECT_LT(predict_evaluation(beyond, faster_dram, true).memory_ms, b.memory_ms);
}

TEST(anesim_Timing, MoreFlopsPerSecondMeansFasterComputeBoundKernels) {
  const ProgramCost c{5e10, 32, 1 << 20, 0, 0};  // compute-bound: 50 GFLOP, no weights to fetch
  compiler::ChipProfile faster = m4();
  faster.fp16_tflops *= 2;
  EXPECT_NEAR(predict_evaluation(c, faster).compute_ms * 2, predict_evaluation(c, m4()).compute_ms, 1e-9);
  // M1 (11 TFLOPS, slower dispatch) is well behind M4 on a compute-bound kernel.
  const double m1 = predict_evaluation(c, compiler::chip_profile("m1")).total_ms;
  EXPECT_GT(m1, 1.5 * predict_evaluation(c, m4()).total_ms);
}

TEST(anesim_Timing, CompileAndLoadScaleWithProgramsAndWeights) {
  const ChipTiming t = chip_timing(m4());
  EXPECT_NEAR(compile_and_load_ms(24, 0, t), 24 * t.compile_ms_per_program, 1e-9);
  EXPECT_NEAR(reload_ms(1e9, t), 1e9 / (t.load_gbps * 1e6), 1e-9);
  EXPECT_NEAR(compile_and_load_ms(10, 1e8, t), 10 * t.compile_ms_per_program + reload_ms(1e8, t), 1e-9);
  EXPECT_GT(compile_and_load_ms(60, 3.4e8, chip_timing(compiler::chip_profile("m1"))), compile_and_load_ms(60, 3.4e8, t));
}

TEST(anesim_Timing, ChipTimingTakesTheProfileAndTheTable) {
  for (const std::string& name : compiler::chip_names()) {
    const compiler::ChipProfile& p = compiler::chip_profile(name);
    const ChipTiming t = chip_timing(p);
    EXPECT_EQ(t.fp16_tflops, p.fp16_tflops) << name;
    EXPECT_EQ(t.dispatch_ms, p.dispatch_ms) << name;
    EXPECT_EQ(t.sram_bytes, p.sram_bytes) << name;
    EXPECT_GT(t.dram_gbps, 0) << name;
    EXPECT_GT(t.compile_ms_per_program, 0) << name;
  }
  compiler::ChipProfile custom = m4();
  custom.name = "custom";
  EXPECT_EQ(chip_timing(custom).dram_gbps, chip_timing(m4()).dram_gbps);
}

TEST(anesim_Timing, CountersAccumulateThePredictionOfEveryEvaluation) {
  // A deep program of 16 convs 768×768 at S = 32.
  Graph g("deep");
  ir::Value v = g.input("x", {ElemType::F16, {1, 768, 1, 32}});
  for (int i = 0; i < 16; i++)
    v = g.add_node(Op::Conv1x1,
                   {v, g.constant_f32("w" + std::to_string(i), {768, 768, 1, 1}, std::vector<float>(768 * 768, 0.001f))}, {},
                   i == 15 ? "y" : "");
  g.add_output("y", v);
  compiler::CompiledProgram cp = compiler::compile_graph(g, m4()).program;
  AnesimDriver d;
  auto p = d.compile(cp.mil_text, cp.weights, "deep");
  d.load(*p);
  const ProgramCost& cost = d.cost(*p);
  EXPECT_EQ(cost.ops, 16);
  EXPECT_DOUBLE_EQ(cost.flops, 16.0 * 2 * 768 * 768 * 32);
  EXPECT_EQ(cost.surface_bytes, 2 * 768 * 32 * 2);
  EXPECT_GE(cost.working_set_bytes, 16ll * 768 * 768 * 2);  // the weights stay resident
  EXPECT_GE(cost.constant_bytes, 16ll * 768 * 768 * 2);     // the weights (and a few scalars)
  EXPECT_LT(cost.constant_bytes, 16ll * 768 * 768 * 2 + 4096);
  const TimingBreakdown first = d.predicted(*p);  // before any evaluation: weights still in DRAM
  EXPECT_EQ(first.dram_bytes, cost.constant_bytes);
  auto in = test::make_surfaces(1, 49152), out = test::make_surfaces(1, 49152);
  for (int i = 0; i < 3; i++) d.evaluate(*p, in.ptrs(), out.ptrs());
  // The first evaluation fetched the weights; the next two found them in SRAM (18 MiB fits).
  const TimingBreakdown t = d.predicted(*p);
  EXPECT_EQ(t.dram_bytes, 0);
  EXPECT_EQ(t.utilisation, 0.94);
  EXPECT_NEAR(d.counters().predicted_ane_ms, first.total_ms + 2 * t.total_ms, 1e-9);
  EXPECT_GT(first.total_ms, t.total_ms);
  EXPECT_GT(t.total_ms, t.dispatch_ms);
  EXPECT_LT(t.total_ms, 1.0);  // 0.6 GFLOP: well under a millisecond on an ANE
  EXPECT_NEAR(d.predicted_compile_ms(), chip_timing(m4()).compile_ms_per_program, 1e-9);
  EXPECT_NEAR(d.predicted_load_ms(), reload_ms(double(cost.constant_bytes), chip_timing(m4())), 1e-9);
  std::printf("  deep 16-conv program: %.3f ms predicted (dispatch %.3f, compute %.3f, copy %.3f)\n", t.total_ms,
              t.dispatch_ms, t.compute_ms, t.copy_ms);
}

}  // namespace
}  // namespace orion::runtime::anesim
