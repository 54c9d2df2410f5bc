// The pass pipeline (pipeline.h): rounds of named passes until nothing changes.
#include "compiler/pipeline.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "base/error.h"

namespace orion::compiler {

bool PassContext::has_errors() const {
  return std::any_of(diagnostics.begin(), diagnostics.end(),
                     [](const Diagnostic& d) { return d.level == Diagnostic::Level::Error; });
}

std::vector<std::string> standard_pipeline() {
  return {"dce", "fold-identity", "fuse-casts", "legalize-ane", "dce", "annotate-sram", "validate-ane"};
}

namespace {

void verify_or_throw(const ir::Graph& g, const std::string& after) {
  std::string problem = g.verify();
  if (problem.empty()) return;
  throw Error(ErrorKind::Internal, fmt::format("graph '{}' is invalid {}: {}", g.name(), after, problem),
              {{}, {}, -1, "this is a bug in that pass; run with the pass alone to reproduce it"});
}

// A pass that runs every round (validate-ane) reports the same finding each time; keep the first.
void drop_repeated_diagnostics(PassContext& ctx) {
  std::set<std::tuple<int, std::string, std::string, std::string>> seen;
  std::erase_if(ctx.diagnostics, [&](const Diagnostic& d) {
    return !seen.insert({int(d.level), d.rule, d.node, d.message}).second;
  });
}

}  // namespace

PipelineResult run_passes(ir::Graph& g, const std::vector<std::unique_ptr<Pass>>& passes, PassContext& ctx,
                          const PipelineOptions& options) {
  if (options.verify_each) verify_or_throw(g, "before the first pass");
  PipelineResult result;
  for (int round = 1; round <= options.max_rounds; round++) {
    result.rounds = round;
    std::vector<std::string> changers;
    for (const auto& pass : passes) {
      bool changed = pass->run(g, ctx);
      drop_repeated_diagnostics(ctx);
      result.runs.push_back({round, pass->name(), changed});
      if (changed && std::find(changers.begin(), changers.end(), pass->name()) == changers.end())
        changers.push_back(pass->name());
      if (options.verify_each) verify_or_throw(g, fmt::format("after pass '{}' (round {})", pass->name(), round));
      if (options.after_each) options.after_each(*pass, changed, g);
    }
    if (changers.empty()) return result;
    if (round == options.max_rounds)
      throw Error(ErrorKind::Internal,
                  fmt::format("passes did not reach a fixed point on graph '{}' in {} rounds; still changing: {}", g.name(),
                              options.max_rounds, fmt::join(changers, ", ")),
                  {{}, {}, -1, "a pass must report no change when it has nothing left to do"});
  }
  return result;  // max_rounds <= 0: nothing ran
}

PipelineResult run_pipeline(ir::Graph& g, const std::vector<std::string>& pass_names, PassContext& ctx,
                            const PipelineOptions& options) {
  std::vector<std::unique_ptr<Pass>> passes;
  for (const std::string& name : pass_names) passes.push_back(make_pass(name));
  return run_passes(g, passes, ctx, options);
}

}  // namespace orion::compiler
