// The pass registry and the pipeline: fixed point, verify-each, non-termination, unknown names,
// the standard pipeline's names, and the SRAM estimate end to end.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "compiler/pass.h"
#include "compiler/pipeline.h"
#include "ir/text.h"

namespace orion::compiler {
namespace {

const std::vector<std::string> kMine = {"dce", "fold-identity", "fuse-casts", "dce", "annotate-sram"};

// Identity chains, a cast round trip and dead code, interleaved so that one pass exposes work for
// another: fold-identity leaves the inner reshape for dce, fuse-casts leaves the inner cast.
const char* kMessy = R"(graph messy {
  %x = input : fp16[1, 8, 1, 16]
  %a = identity(%x) : fp16[1, 8, 1, 16]
  %r1 = reshape(%a) {shape = [1, 8, 16]} : fp16[1, 8, 16]
  %r2 = reshape(%r1) {shape = [1, 8, 1, 16]} : fp16[1, 8, 1, 16]
  %up = cast(%r2) {dtype = "fp32"} : fp32[1, 8, 1, 16]
  %down = cast(%up) {dtype = "fp16"} : fp16[1, 8, 1, 16]
  %y = relu(%down) : fp16[1, 8, 1, 16]
  %dead = exp(%y) : fp16[1, 8, 1, 16]
  return %out = %y
}
)";

TEST(Pipeline, ReachesAFixedPoint) {
  ir::Graph g = ir::parse_graph(kMessy);
  PassContext ctx;
  PipelineResult r = run_pipeline(g, kMine, ctx, {.verify_each = true});
  EXPECT_EQ(ir::print_graph(g), R"(graph messy {
  %x = input : fp16[1, 8, 1, 16]
  %y = relu(%x) {sram_bytes = 512} : fp16[1, 8, 1, 16]
  return %out = %y
}
)");
  // Round 1 changes the graph, round 2 confirms nothing is left to do.
  EXPECT_EQ(r.rounds, 2);
  ASSERT_EQ(r.runs.size(), 2 * kMine.size());
  EXPECT_TRUE(std::none_of(r.runs.begin() + 5, r.runs.end(), [](const PassRun& p) { return p.changed; }));
  EXPECT_TRUE(r.runs[1].changed);  // fold-identity
  EXPECT_EQ(r.runs[1].pass, "fold-identity");
  EXPECT_EQ(ctx.sram_estimate_bytes, 512);  // x and y alive together, no constants
  // Running again: one round, nothing changes.
  PipelineResult again = run_pipeline(g, kMine, ctx, {.verify_each = true});
  EXPECT_EQ(again.rounds, 1);
}

TEST(Pipeline, AfterEachSeesEveryPass) {
  ir::Graph g = ir::parse_graph(kMessy);
  PassContext ctx;
  std::vector<std::string> seen;
  PipelineOptions opt;
  opt.after_each = [&](const Pass& p, bool changed, const ir::Graph& graph) {
    seen.push_back(std::string(p.name()) + (changed ? "*" : ""));
    EXPECT_EQ(graph.verify(), "");
  };
  run_pipeline(g, {"fold-identity", "dce"}, ctx, opt);
  EXPECT_EQ(seen, (std::vector<std::string>{"fold-identity*", "dce*", "fold-identity", "dce"}));
}

// Test-only passes.
class BreakTypes final : public Pass {  // leaves a stale result type behind (once)
 public:
  const char* name() const override { return "break-types"; }
  const char* summary() const override { return "test: corrupts the first relu's result type"; }
  bool run(ir::Graph& g, PassContext&) override {
    for (int i = 0; i < int(g.nodes().size()); i++)
      if (g.node(i).op == ir::Op::Relu) {
        if (g.node(i).results[0].shape == std::vector<int64_t>{1, 1}) return false;
        g.node_mut(i).results[0].shape = {1, 1};
        return true;
      }
    return false;
  }
};
class AlwaysChanges final : public Pass {  // claims a change every time
 public:
  const char* name() const override { return "always-changes"; }
  const char* summary() const override { return "test: never reaches a fixed point"; }
  bool run(ir::Graph&, PassContext&) override { return true; }
};

std::vector<std::unique_ptr<Pass>> passes_with(std::unique_ptr<Pass> extra) {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_pass("dce"));
  p.push_back(std::move(extra));
  p.push_back(make_pass("fold-identity"));
  return p;
}

TEST(Pipeline, VerifyEachNamesThePassThatBrokeTheGraph) {
  ir::Graph g = ir::parse_graph(kMessy);
  PassContext ctx;
  try {
    run_passes(g, passes_with(std::make_unique<BreakTypes>()), ctx, {.verify_each = true});
    FAIL() << "the broken graph went unnoticed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_EQ(e.message(), "graph 'messy' is invalid after pass 'break-types' (round 1): node 'y' has stale result types");
  }
  // Without verify_each nothing checks (which is why tests and debug builds turn it on).
  ir::Graph g2 = ir::parse_graph(kMessy);
  EXPECT_NO_THROW(run_passes(g2, passes_with(std::make_unique<BreakTypes>()), ctx, {.verify_each = false}));
}

TEST(Pipeline, VerifiesTheInputGraphToo) {
  ir::Graph g = ir::parse_graph(kMessy);
  g.node_mut(g.find("y")).results[0].elem = ir::ElemType::F32;
  PassContext ctx;
  try {
    run_pipeline(g, kMine, ctx, {.verify_each = true});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "graph 'messy' is invalid before the first pass: node 'y' has stale result types");
  }
}

TEST(Pipeline, NoFixedPointIsAnInternalErrorNamingThePass) {
  ir::Graph g = ir::parse_graph(kMessy);
  PassContext ctx;
  try {
    run_passes(g, passes_with(std::make_unique<AlwaysChanges>()), ctx, {.verify_each = true, .max_rounds = 5});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    // dce and fold-identity settle in round 2; only the faulty pass is still changing in round 5.
    EXPECT_EQ(e.message(),
              "passes did not reach a fixed point on graph 'messy' in 5 rounds; still changing: always-changes");
  }
}

TEST(Pipeline, UnknownPassIsAUsageErrorBeforeAnythingRuns) {
  ir::Graph g = ir::parse_graph(kMessy);
  std::string before = ir::print_graph(g);
  PassContext ctx;
  try {
    run_pipeline(g, {"dce", "no-such-pass"}, ctx);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_EQ(e.message(), "unknown pass 'no-such-pass'");
    EXPECT_NE(e.context().hint.find("dce, fold-identity, fuse-casts, annotate-sram"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ir::print_graph(g), before);  // dce did not run
}

TEST(Pipeline, StandardPipelineNamesEveryStep) {
  EXPECT_EQ(standard_pipeline(), (std::vector<std::string>{"dce", "fold-identity", "fuse-casts", "legalize-ane", "dce",
                                                           "annotate-sram", "validate-ane"}));
  // Each name is registered, or (while legalize-ane / validate-ane are being written) the registry
  // refuses it clearly instead of the pipeline skipping it.
  auto names = pass_names();
  for (const std::string& n : standard_pipeline()) {
    if (std::find(names.begin(), names.end(), n) != names.end()) continue;
    try {
      make_pass(n);
      ADD_FAILURE() << n << " is made but not listed by pass_names()";
    } catch (const Error& e) {
      EXPECT_EQ(e.message(), "unknown pass '" + n + "'");
    }
  }
}

// Once legalize-ane and validate-ane are registered, the whole standard pipeline runs on a small
// FFN-shaped program, reaches a fixed point with the verifier on, and finds nothing to reject.
TEST(Pipeline, StandardPipelineRunsWhenEveryPassIsRegistered) {
  auto names = pass_names();
  for (const std::string& n : standard_pipeline())
    if (std::find(names.begin(), names.end(), n) == names.end()) GTEST_SKIP() << n << " is not registered yet";
  ir::Graph g = ir::parse_graph(R"(graph ffn {
  %x = input : fp16[1, 768, 1, 64]
  %w = const splat<0.5> : fp16[768, 768, 1, 1]
  %i = identity(%x) : fp16[1, 768, 1, 64]
  %up = cast(%i) {dtype = "fp32"} : fp32[1, 768, 1, 64]
  %down = cast(%up) {dtype = "fp16"} : fp16[1, 768, 1, 64]
  %y = conv1x1(%down, %w) : fp16[1, 768, 1, 64]
  %z = relu(%y) : fp16[1, 768, 1, 64]
  %dead = exp(%z) : fp16[1, 768, 1, 64]
  return %out = %z
}
)");
  PassContext ctx;
  PipelineResult r = run_pipeline(g, standard_pipeline(), ctx, {.verify_each = true});
  EXPECT_GE(r.rounds, 2);
  EXPECT_FALSE(ctx.has_errors()) << ctx.diagnostics.front().message;
  for (const char* gone : {"i", "up", "down", "dead"}) EXPECT_EQ(g.find(gone), -1) << gone;
  EXPECT_GT(ctx.sram_estimate_bytes, 768 * 768 * 2);
  EXPECT_EQ(run_pipeline(g, standard_pipeline(), ctx, {.verify_each = true}).rounds, 1);
}

TEST(PassRegistry, EveryPassKnowsItsNameAndSummary) {
  auto names = pass_names();
  for (const char* mine : {"dce", "fold-identity", "fuse-casts", "annotate-sram"})
    EXPECT_NE(std::find(names.begin(), names.end(), mine), names.end()) << mine;
  for (const std::string& n : names) {
    auto p = make_pass(n);
    EXPECT_EQ(p->name(), n);
    EXPECT_GT(std::string(p->summary()).size(), 10u) << n;
  }
}

TEST(PassContext, HasErrorsOnlyForErrors) {
  PassContext ctx;
  EXPECT_FALSE(ctx.has_errors());
  ctx.warn("C20", "y", "big");
  EXPECT_FALSE(ctx.has_errors());
  ctx.error("C16", "", "too many constants");
  EXPECT_TRUE(ctx.has_errors());
}

// annotate-sram in a pipeline: one C20 warning however many rounds ran, and it goes away when a
// later run finds the program small enough.
TEST(Pipeline, SramWarningDoesNotPileUp) {
  ir::Graph g = ir::parse_graph(R"(graph big {
  %x = input : fp16[1, 4096, 1, 64]
  %w = const splat<0.0> : fp16[4096, 4096, 1, 1]
  %i = identity(%x) : fp16[1, 4096, 1, 64]
  %y = conv1x1(%i, %w) : fp16[1, 4096, 1, 64]
  return %out = %y, %small = %x
}
)");
  PassContext ctx;
  PipelineResult r = run_pipeline(g, {"annotate-sram", "fold-identity", "dce", "annotate-sram"}, ctx, {.verify_each = true});
  EXPECT_EQ(r.rounds, 2);
  ASSERT_EQ(ctx.diagnostics.size(), 1u);
  EXPECT_EQ(ctx.diagnostics[0].rule, "C20");
  EXPECT_EQ(ctx.diagnostics[0].node, "y");
  EXPECT_EQ(ctx.sram_estimate_bytes, (32 << 20) + 2 * 524288);
  // Drop the conv: the estimate falls under the limit and the warning disappears.
  g.outputs_mut().erase(g.outputs_mut().begin());
  run_pipeline(g, {"dce", "annotate-sram"}, ctx, {.verify_each = true});
  EXPECT_TRUE(ctx.diagnostics.empty());
  EXPECT_EQ(ctx.sram_estimate_bytes, 524288);
}

}  // namespace
}  // namespace orion::compiler
