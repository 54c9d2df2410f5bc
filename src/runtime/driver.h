// The driver interface: what Orion needs from an ANE, implemented by the Apple driver (runtime/ane,
// macOS only) and by anesim (runtime/anesim, everywhere). Everything above this file — surfaces,
// the program cache, the compile budget, weight updates, inference and training through ANE
// programs — is written against it and therefore tested on any machine.
//
// The life of a program, as on the hardware (DESIGN.md §3):
//   compile(MIL text bytes, weight dictionary) → load → evaluate … evaluate → unload
// A weight dictionary maps "@model_path/weights/<file>.bin" to MILBlob v2 file images.
// Inputs and outputs are bound in the ALPHABETICAL order of their MIL names (C6); every input
// surface must have the same allocation size, and every output surface too (C5, C13); no surface
// may be smaller than the chip's minimum (C7) — else evaluation fails with status 0x1d.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/chip.h"
#include "runtime/surface.h"

namespace orion::runtime {

using WeightDict = std::map<std::string, std::vector<uint8_t>>;

// Failures the hardware reports, carried in an orion::Error of kind Runtime whose message starts
// with the status name; DriverError adds the numeric status for code that must react to it.
enum class DriverStatus : uint32_t {
  CompileFailed = 1,  // the ANE compiler refused the program (or failed silently past the budget, C9)
  LoadFailed = 2,
  EvalFailed = 3,
  BadSurfaces = 0x1d,   // evaluation with small or non-uniform buffers (C5, C7, C13)
  NotAvailable = 0xff,  // no ANE on this platform
};
class DriverError : public Error {
 public:
  DriverError(DriverStatus status, const std::string& message, const std::string& hint = {});
  DriverStatus status() const { return status_; }

 private:
  DriverStatus status_;
};

// A compiled program, owned by the caller; only the driver that made it can use it.
class DriverProgram {
 public:
  virtual ~DriverProgram() = default;
  virtual const std::string& name() const = 0;
  virtual bool loaded() const = 0;
  // MIL names of the inputs and outputs in binding (alphabetical) order.
  virtual const std::vector<std::string>& input_names() const = 0;
  virtual const std::vector<std::string>& output_names() const = 0;
};

struct DriverOptions {
  const compiler::ChipProfile* chip = nullptr;  // nullptr: the default chip (m4)
  // anesim only: does unload → overwrite weight files → load change the results? The hardware
  // probes on M3/M4/M5 say no (DESIGN.md §6), so the default models the stale behaviour.
  bool reload_takes_effect = false;
};

struct DriverCounters {
  int compiles = 0;  // attempted compiles in this process (C9 budget)
  int failed_compiles = 0;
  int loads = 0, unloads = 0, evaluations = 0;
  double predicted_ane_ms = 0;  // anesim's timing model: what the hardware would have taken
};

class Driver {
 public:
  virtual ~Driver() = default;
  virtual std::string name() const = 0;  // "anesim", "ane"
  virtual const compiler::ChipProfile& chip() const = 0;

  // Compiles MIL text (UTF-8, C19) with its weights. Throws DriverError(CompileFailed) when the
  // program breaks a rule; past the chip's compile budget the hardware fails silently — the
  // driver reports that as CompileFailed too, naming the budget (C9).
  virtual std::unique_ptr<DriverProgram> compile(const std::string& mil_text, const WeightDict& weights,
                                                 const std::string& name) = 0;
  virtual void load(DriverProgram& p) = 0;
  virtual void unload(DriverProgram& p) = 0;
  // Overwrites the program's weight files where the framework keeps them (the "delta reload"
  // path: unload → replace_weight_files → load). Whether a reload then uses them is the
  // hardware's business (C10) — callers must verify.
  virtual void replace_weight_files(DriverProgram& p, const WeightDict& weights) = 0;
  // Runs a loaded program. inputs / outputs are in binding order (input_names / output_names).
  virtual void evaluate(DriverProgram& p, const std::vector<Surface*>& inputs, const std::vector<Surface*>& outputs) = 0;

  virtual const DriverCounters& counters() const = 0;
};

// Drivers by name. "anesim" exists everywhere; "ane" only on macOS (elsewhere make_driver("ane")
// throws DriverError(NotAvailable) saying so). Adding a backend: one folder + one line in
// driver_registry.cpp.
std::unique_ptr<Driver> make_driver(const std::string& name, const DriverOptions& options = {});
std::vector<std::string> driver_names();

}  // namespace orion::runtime
