// AneKernel: one IR graph compiled for a Driver and run on host fp32 tensors.
//
//   AneKernel k = AneKernel::compile(driver, budget, graph);   // passes → MIL → driver compile → load
//   auto out = k.run({{"x", x}});                             // fp32 in, fp32 out, keyed by name
//
// Between the host's tensors and the program's buffers lie the hardware's rules, which the kernel
// carries out so its callers never see them:
//   - every input surface has the program's one input allocation size, every output surface the
//     one output size (C5, C13), never below the chip's minimum (C7);
//   - surfaces are handed to the driver in the alphabetical order of their MIL names (C6),
//     whatever order the graph declared them in;
//   - data is packed fp16 [1, C, 1, S] from byte 0 (C14), converted from and to fp32;
//   - what legalize-ane changed at the boundary (AneBoundary) is undone: inputs whose sequence was
//     padded (C7) get zeros in the padding, outputs are cut back to their real positions, tensors
//     flattened to [1, C, 1, S] (C14) are handed back in their declared shape, and outputs that a
//     concat used to build (C1) are concatenated again from their parts.
// Each run is timed by phase: writing surfaces, evaluating, reading surfaces.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "ir/graph.h"
#include "ir/interpret.h"
#include "runtime/compile_budget.h"
#include "runtime/driver.h"
#include "runtime/surface.h"

namespace orion::runtime {

using TensorMap = std::map<std::string, ir::Tensor32>;

// Seconds spent, summed over the kernel's life.
struct KernelTiming {
  double compile_s = 0;         // passes + emission + driver compile + load
  double write_surfaces_s = 0;  // fp32 → fp16, padding, into the input surfaces
  double evaluate_s = 0;        // driver.evaluate
  double read_surfaces_s = 0;   // fp16 → fp32, unpadding, reassembling split outputs
  int64_t runs = 0;
};

class AneKernel {
 public:
  // Compiles `g` for driver.chip() (the graph is copied; the caller's stays as built), charging
  // one compile to `budget` first (which refuses when none is left, C9), then loads it.
  // Compiler errors (a rule the graph breaks) are Input errors; driver failures DriverErrors.
  static std::unique_ptr<AneKernel> compile(Driver& driver, CompileBudget& budget, const ir::Graph& g);
  ~AneKernel();  // unloads
  AneKernel(const AneKernel&) = delete;
  AneKernel& operator=(const AneKernel&) = delete;

  // Runs the program. `inputs` holds one tensor per graph input, in the shape the graph declared
  // (extra entries are ignored); returns every graph output in its declared shape.
  TensorMap run(const TensorMap& inputs);

  const std::string& name() const { return program_.name; }
  // The graph as built (before the passes): its inputs and outputs are what run() speaks.
  const ir::Graph& graph() const { return graph_; }
  const compiler::CompiledProgram& program() const { return program_; }
  const compiler::AneBoundary& boundary() const { return boundary_; }
  DriverProgram& driver_program() { return *handle_; }
  Driver& driver() { return driver_; }
  const KernelTiming& timing() const { return timing_; }

  void unload();
  void load();
  // The delta-reload path: unload → driver.replace_weight_files → load. Whether the reloaded
  // program computes with the new files is the hardware's business (C10): verify the results.
  void reload_weights(const WeightDict& weights);
  bool loaded() const { return handle_ && handle_->loaded(); }

  // An input kept in its surface between runs — a weight streamed as an input, rewritten only when
  // it changes: returns the surface's packed fp16 data (the input's elements, row-major in the
  // shape the graph declared) for the caller to fill; from now on run() leaves that surface as it
  // is when `inputs` has no tensor of the name. Its boundary must be one legalize-ane left as
  // declared (weights_as_inputs.h lays weights out so).
  uint16_t* resident_input(const std::string& name);

  // The surfaces of the last run, in binding order (tests inspect them).
  const std::vector<Surface>& input_surfaces() const { return inputs_; }
  const std::vector<Surface>& output_surfaces() const { return outputs_; }

 private:
  AneKernel(Driver& driver, ir::Graph built);
  void write_inputs(const TensorMap& inputs);
  TensorMap read_outputs();

  Driver& driver_;
  ir::Graph graph_;  // as built
  compiler::CompiledProgram program_;
  compiler::AneBoundary boundary_;
  std::unique_ptr<DriverProgram> handle_;
  std::vector<Surface> inputs_, outputs_;  // binding order, uniform sizes
  std::vector<char> resident_;             // by input binding: kept between runs (resident_input)
  KernelTiming timing_;
};

// Copies `rows` rows of `from_len` floats into rows of `to_len` floats (to_len ≥ from_len: zeros
// after each row; to_len < from_len: each row cut short). This is how a sequence axis is padded
// for the program (C7) and cut back for the host: a [1, C, 1, S] tensor is C rows of S.
std::vector<float> restride_rows(const std::vector<float>& from, int64_t rows, int64_t from_len, int64_t to_len);

}  // namespace orion::runtime
