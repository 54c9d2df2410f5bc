// Weight updates (DESIGN.md §6): giving a compiled kernel new weights, by one of three strategies,
// and checking that it really computes with them.
//
//   DeltaReload      unload → rewrite the program's weight files → load. The fastest (no compile),
//                    but probes on M3/M4/M5 report that the reloaded program keeps the weights it
//                    was compiled with (C10) — anesim models that by default.
//   WeightsAsInputs  the kernel is compiled once with its weights as inputs (weights_as_inputs.h);
//                    an update only changes what is streamed through the surfaces on every call.
//                    The first switch to it costs one compile, later updates none.
//   Recompile        compile a program with the new weights baked in and swap it in: always right,
//                    but slow and limited by the compile budget (C9).
//   Auto             DeltaReload, then WeightsAsInputs, then Recompile, accepting the first whose
//                    probe verifies (a kernel already streaming weights starts there).
//
// Verification evaluates a probe input and compares every output with a reference computed on the
// CPU (by default ir::interpret of the new graph in fp32) within fp16 tolerance. A strategy whose
// results are stale — or which cannot apply, like a delta reload of a graph whose structure changed
// — gives way to the next one, and the UpdateResult says which strategy was used and why.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/ane_kernel.h"
#include "runtime/compile_budget.h"
#include "runtime/driver.h"
#include "runtime/program_cache.h"
#include "runtime/weights_as_inputs.h"

namespace orion::runtime {

enum class UpdateStrategy { Auto, DeltaReload, WeightsAsInputs, Recompile };
const char* strategy_name(UpdateStrategy s);  // "auto", "delta-reload", "weights-as-inputs", "recompile"

// A kernel whose weights can change: an AneKernel with its weights either baked in (compiled as
// constants) or streamed as inputs. run() takes the graph's own inputs in either case.
//
// Its programs live in a ProgramCache slot (model, kernel, layer, bucket). Every compile — the
// first, a recompile with new weights, the switch to weights as inputs — is the slot's next weights
// version, which the cache compiles (a miss) while evicting the program it replaces; updates that
// keep the program (weights streamed as inputs, a delta reload) keep the version. So the version
// counts the programs compiled for the slot, and the cache's statistics are the kernel's compiles.
// One UpdatableKernel per slot: two in one slot would evict each other's programs.
class UpdatableKernel {
 public:
  enum class Mode { BakedWeights, WeightsAsInputs };
  // A kernel in a program cache of its own (one slot, named after the graph).
  UpdatableKernel(Driver& driver, CompileBudget& budget, ir::Graph g, Mode mode = Mode::BakedWeights);
  // A kernel in `cache`, in key's slot, starting at key's weights version.
  UpdatableKernel(ProgramCache& cache, ProgramKey key, ir::Graph g, Mode mode = Mode::BakedWeights);

  TensorMap run(const TensorMap& inputs);
  // The unverified fast path of a weights-as-inputs update: streams g's weights from the next run
  // on (no MIL comparison, no probe). g must be this kernel's graph rebuilt with other weights —
  // the caller vouches for that and verifies from time to time through update_weights.
  void stream_weights(const ir::Graph& g);
  // The faster path, without a graph: the packed fp16 data of weight input i (weight_inputs()[i],
  // declared.numel() elements, the constant's row-major values first and zeros after them) in the
  // program's input surface. Every run reads the weights from there (written once per update, not
  // once per run), so new values written there are what the next run computes with. The caller
  // vouches for them as for stream_weights; graph() keeps the weights it was last given as a graph.
  uint16_t* weight_data(size_t i);

  Mode mode() const { return mode_; }
  // The graph with the current weights baked in: what the kernel computes (the CPU reference).
  const ir::Graph& graph() const { return graph_; }
  AneKernel& kernel() { return *kernel_; }
  const ProgramKey& key() const { return key_; }  // the resident program's, with its weights version
  const std::vector<WeightInput>& weight_inputs() const { return weight_inputs_; }
  Driver& driver() { return cache_.driver(); }
  CompileBudget& budget() { return cache_.budget(); }

 private:
  friend class WeightUpdater;
  void compile_first();                    // in the constructor's mode
  void compile(const ir::Graph& program);  // the slot's next program (the first: key's version)
  void compile_baked(const ir::Graph& g);
  void compile_weights_as_inputs(const ir::Graph& g);
  void stream_weights_of(const ir::Graph& g);  // g's weights into the resident weight surfaces

  std::unique_ptr<ProgramCache> own_cache_;  // the first constructor's
  ProgramCache& cache_;
  ProgramKey key_;
  ir::Graph graph_;
  Mode mode_;
  std::shared_ptr<AneKernel> kernel_;       // also held by the cache until evicted
  std::vector<WeightInput> weight_inputs_;  // WeightsAsInputs mode only
  std::vector<uint16_t*> weight_data_;      // their resident surfaces' fp16 data (AneKernel::resident_input)
};

// The CPU reference of a verification: outputs by name for the given inputs.
using ReferenceFn = std::function<TensorMap(const TensorMap& inputs)>;

struct Verification {
  bool enabled = true;    // Auto always verifies: it could not choose otherwise
  TensorMap probe;        // empty: uniform [−1, 1) inputs of the graph's shapes (fixed seed)
  ReferenceFn reference;  // empty: ir::interpret of the new graph, fp32
  // An output passes when max |kernel − reference| ≤ tolerance · max(1, max |reference|), and —
  // when the update changes the outputs by more than tolerance / 4 — by at most half that change
  // (a stale kernel keeps giving the old outputs, which a small update leaves within tolerance).
  // A smaller update (one AdamW step at a low learning rate: far below any fixed tolerance) is
  // checked against its expected change instead — the CPU reference with the new weights minus
  // the one with the old: the kernel's outputs must move (a stale reload leaves them bit for bit
  // as they were), and, where the change stands above fp16 noise, along that change.
  double tolerance = 2e-2;
};

struct UpdateResult {
  UpdateStrategy requested = UpdateStrategy::Auto;
  UpdateStrategy used = UpdateStrategy::Auto;
  bool verified = false;        // the accepted strategy's probe matched the reference
  bool stale_detected = false;  // some strategy computed with old weights (C10)
  double max_error = 0;         // the accepted strategy's, relative as in Verification::tolerance
  int compiles = 0;             // compile budget spent by this update
  double seconds = 0;
  std::vector<std::string> attempts;  // "delta-reload: stale (error 0.41 > 0.02)", ...
  std::string message;                // one line saying what happened
};

// Gives `k` the weights of `new_graph` (the same kernel built with new weights). Throws a Runtime
// error listing the attempts when no strategy gives verified results.
UpdateResult update_weights(UpdatableKernel& k, const ir::Graph& new_graph, UpdateStrategy strategy = UpdateStrategy::Auto,
                            const Verification& verification = {});
// The same with new values for some constants of the current graph, by constant name.
UpdateResult update_weights(UpdatableKernel& k, const TensorMap& new_weights, UpdateStrategy strategy = UpdateStrategy::Auto,
                            const Verification& verification = {});

// A copy of g whose named constants hold new values (same shapes; stored in each constant's type).
ir::Graph with_weights(const ir::Graph& g, const TensorMap& weights);

}  // namespace orion::runtime
