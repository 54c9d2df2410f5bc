#include "compiler/compile.h"

#include <fmt/format.h>

#include "base/error.h"
#include "compiler/pipeline.h"

namespace orion::compiler {

std::string format_diagnostic(const Diagnostic& d) {
  return fmt::format("{}{}{}: {}", d.level == Diagnostic::Level::Error ? "error" : "warning",
                     d.rule.empty() ? "" : " " + d.rule, d.node.empty() ? "" : " '" + d.node + "'", d.message);
}

std::vector<Diagnostic> check_graph(ir::Graph& g, const ChipProfile& chip) {
  PassContext ctx;
  ctx.chip = &chip;
  run_pipeline(g, standard_pipeline(), ctx);
  return ctx.diagnostics;
}

CompileResult compile_graph(ir::Graph& g, const ChipProfile& chip, const EmitOptions& emit) {
  PassContext ctx;
  ctx.chip = &chip;
  PipelineResult pr = run_pipeline(g, standard_pipeline(), ctx);
  if (ctx.has_errors()) {
    std::string all;
    for (const Diagnostic& d : ctx.diagnostics)
      if (d.level == Diagnostic::Level::Error) all += (all.empty() ? "" : "; ") + format_diagnostic(d);
    throw Error(ErrorKind::Input, fmt::format("program '{}' breaks the ANE's rules for {}: {}", g.name(), chip.name, all),
                {{}, g.name(), -1, "run this kernel on the CPU, or change its shapes (see docs/ane-rules.md)"});
  }
  CompileResult r;
  r.program = emit_mil(g, chip, emit);
  r.diagnostics = ctx.diagnostics;
  r.sram_estimate_bytes = ctx.sram_estimate_bytes;
  r.boundary = ctx.ane_boundary;
  r.pipeline_rounds = pr.rounds;
  return r;
}

}  // namespace orion::compiler
