// Compiler passes: small named units, each rewriting or checking a Graph (LLVM/MLIR style).
// A pass reports whether it changed the graph; the pipeline (pipeline.h) runs the list to a fixed
// point (at most 20 rounds) and runs the IR verifier after every pass when asked (tests, debug).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "compiler/ane_boundary.h"
#include "compiler/chip.h"
#include "ir/graph.h"

namespace orion::compiler {

// What passes learn and report beside the graph: warnings (SRAM), the per-program estimate, and
// errors (validate-ane) — each naming the node and the rule.
struct Diagnostic {
  enum class Level { Warning, Error } level;
  std::string rule;  // "C16", "C12", ...; "" when not a hardware rule
  std::string node;  // node name, "" for the whole program
  std::string message;
};

struct PassContext {
  const ChipProfile* chip = &default_chip();
  std::vector<Diagnostic> diagnostics;
  int64_t sram_estimate_bytes = 0;  // set by annotate-sram
  AneBoundary ane_boundary;         // set by legalize-ane: splits, padding, allocation sizes (C1, C5, C7, C13, C18)
  void warn(std::string rule, std::string node, std::string msg) {
    diagnostics.push_back({Diagnostic::Level::Warning, std::move(rule), std::move(node), std::move(msg)});
  }
  void error(std::string rule, std::string node, std::string msg) {
    diagnostics.push_back({Diagnostic::Level::Error, std::move(rule), std::move(node), std::move(msg)});
  }
  bool has_errors() const;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual const char* name() const = 0;  // kebab-case: "dce", "fold-identity", "legalize-ane", ...
  virtual const char* summary() const = 0;
  // Returns true when the graph changed.
  virtual bool run(ir::Graph& g, PassContext& ctx) = 0;
};

// Every pass by name; Usage error listing the names if unknown.
std::unique_ptr<Pass> make_pass(const std::string& name);
std::vector<std::string> pass_names();

}  // namespace orion::compiler
