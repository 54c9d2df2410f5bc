// The pass pipeline: a straight list of named passes run to a fixed point (DESIGN.md §3).
//
//   PassContext ctx;  ctx.chip = &chip_profile("m4");
//   run_pipeline(graph, standard_pipeline(), ctx);   // throws orion::Error; then check ctx.has_errors()
//
// Each round runs every pass in order; the pipeline stops after the first round in which no pass
// changed the graph. With verify_each, Graph::verify() runs before the first pass and after every
// pass, and a failure is an Internal error naming the pass that broke the graph.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/pass.h"
#include "ir/graph.h"

namespace orion::compiler {

struct PipelineOptions {
#ifdef NDEBUG
  bool verify_each = false;
#else
  bool verify_each = true;  // debug builds verify after every pass; tests set it explicitly
#endif
  int max_rounds = 20;
  // Called after every pass (e.g. to print the IR after each step); may be empty.
  std::function<void(const Pass& pass, bool changed, const ir::Graph& g)> after_each = nullptr;
};

struct PassRun {
  int round = 0;  // 1-based
  std::string pass;
  bool changed = false;
};

struct PipelineResult {
  int rounds = 0;             // rounds run; the last one changed nothing
  std::vector<PassRun> runs;  // every pass run, in order
};

// Runs the passes named (make_pass; a Usage error for an unknown name, before anything runs).
// Throws an Internal error when the graph still changes after max_rounds (naming the passes that
// kept changing it) or, with verify_each, when a pass leaves an invalid graph.
PipelineResult run_pipeline(ir::Graph& g, const std::vector<std::string>& pass_names, PassContext& ctx,
                            const PipelineOptions& options = {});
// The same with pass objects (custom or test-only passes).
PipelineResult run_passes(ir::Graph& g, const std::vector<std::unique_ptr<Pass>>& passes, PassContext& ctx,
                          const PipelineOptions& options = {});

// What every compile runs: dce, fold-identity, fuse-casts, legalize-ane, dce, annotate-sram, validate-ane.
std::vector<std::string> standard_pipeline();

}  // namespace orion::compiler
