// anesim's timing model (anesim_timing.cpp): plausible figures against DESIGN.md §2/§4, monotone
// in work, dispatch-dominated for tiny programs, the C20 SRAM penalty, and counters that add up.
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
  EXPECT_NEAR(more_io - small, double(3 << 20) / kSurfaceCopyBytesPerMs, 1e-9);
  // DESIGN.md §4: an IOSurface round trip of GPT-2's widest boundary costs ~2.3 ms.
  EXPECT_NEAR(predict_evaluation({0, 0, 0, 2 * 768 * 1024 * 2}, m4()).copy_ms, 2.3, 0.05);
}

TEST(anesim_Timing, WorkingSetBeyondSramCostsThirtyPercent) {
  const ProgramCost in_sram{1e10, 32, m4().sram_bytes, 0}, beyond{1e10, 32, m4().sram_bytes + 1, 0};
  const TimingBreakdown a = predict_evaluation(in_sram, m4()), b = predict_evaluation(beyond, m4());
  EXPECT_FALSE(a.over_sram);
  EXPECT_TRUE(b.over_sram);
  EXPECT_NEAR(b.compute_ms / a.compute_ms, 1.3, 1e-12);
}

TEST(anesim_Timing, SlowerChipsPredictMoreTime) {
  const ProgramCost c{1e10, 32, 1 << 20, 1 << 20};
  EXPECT_GT(predict_evaluation(c, compiler::chip_profile("m1")).total_ms, predict_evaluation(c, m4()).total_ms);
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
  auto in = test::make_surfaces(1, 49152), out = test::make_surfaces(1, 49152);
  for (int i = 0; i < 3; i++) d.evaluate(*p, in.ptrs(), out.ptrs());
  const TimingBreakdown t = d.predicted(*p);
  EXPECT_EQ(t.utilisation, 0.94);
  EXPECT_NEAR(d.counters().predicted_ane_ms, 3 * t.total_ms, 1e-9);
  EXPECT_GT(t.total_ms, t.dispatch_ms);
  EXPECT_LT(t.total_ms, 1.0);  // 0.6 GFLOP: well under a millisecond on an ANE
  std::printf("  deep 16-conv program: %.3f ms predicted (dispatch %.3f, compute %.3f, copy %.3f)\n", t.total_ms,
              t.dispatch_ms, t.compute_ms, t.copy_ms);
}

}  // namespace
}  // namespace orion::runtime::anesim
