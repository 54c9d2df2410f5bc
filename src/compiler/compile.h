// Compiling one kernel: the full pass pipeline (validation included — on every compile, not only in
// tests) followed by MIL emission. This is the one entry point the runtime and `orion compile` use.
#pragma once
#include <string>
#include <vector>

#include "compiler/ane_boundary.h"
#include "compiler/mil/emit_mil.h"
#include "compiler/pass.h"
#include "compiler/program.h"
#include "ir/graph.h"

namespace orion::compiler {

struct CompileResult {
  CompiledProgram program;
  std::vector<Diagnostic> diagnostics;  // warnings (errors throw)
  int64_t sram_estimate_bytes = 0;
  AneBoundary boundary;  // what the runtime must do with the buffers
  int pipeline_rounds = 0;
};

// Runs standard_pipeline() on g (modified in place) for the chip, then emits MIL. When
// validate-ane reports errors, throws one orion::Error (kind Input) naming the program, listing
// every finding as "rule node: message" and hinting what to do.
CompileResult compile_graph(ir::Graph& g, const ChipProfile& chip, const EmitOptions& emit = {});

// The findings of a pipeline run on g without emitting (for `orion mil check`).
std::vector<Diagnostic> check_graph(ir::Graph& g, const ChipProfile& chip);

std::string format_diagnostic(const Diagnostic& d);  // "error C12 'classifier': ..."

}  // namespace orion::compiler
