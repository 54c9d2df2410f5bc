// The Objective-C calls of the Apple driver, one virtual function each (DESIGN.md §3). ane_driver.mm
// implements them with the private AppleNeuralEngine.framework on macOS; tests implement them with
// a fake, so the driver logic around them (ane_core.h) runs on every machine.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "runtime/ane/ane_plan.h"
#include "runtime/surface.h"

namespace orion::runtime::ane {

// The answer of one framework call: ok, or failed with the NSError's description ("" when the
// call returned NO without an error).
struct CallResult {
  bool ok = true;
  std::string error;
  static CallResult failure(std::string text) { return {false, std::move(text)}; }
};

// One _ANEInMemoryModel.
class FrameworkModel {
 public:
  virtual ~FrameworkModel() = default;
  virtual std::string hex_identifier() = 0;      // hexStringIdentifier
  virtual CallResult compile(unsigned qos) = 0;  // compileWithQoS:options:error:
  virtual CallResult load(unsigned qos) = 0;     // loadWithQoS:options:error:
  virtual CallResult unload(unsigned qos) = 0;   // unloadWithQoS:error:
  // Copies the caller's surfaces into flat IOSurfaces of the same sizes (surface_spec), wraps them
  // in _ANEIOSurfaceObjects, builds an _ANERequest with the given index arrays, calls
  // evaluateWithQoS:options:request:error: and copies the outputs back (whole allocations).
  virtual CallResult evaluate(unsigned qos, const std::vector<Surface*>& inputs, const std::vector<int>& input_indices,
                              const std::vector<Surface*>& outputs, const std::vector<int>& output_indices) = 0;
};

class Framework {
 public:
  virtual ~Framework() = default;
  // _ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist: (MIL as UTF-8 NSData, the
  // weight dictionary {key: {offset, data}} — empty, not nil, without weights: C19), then
  // _ANEInMemoryModel inMemoryModelWithDescriptor:. nullptr when either returns nil.
  virtual std::unique_ptr<FrameworkModel> create_model(const std::string& mil_utf8,
                                                       const std::vector<WeightEntry>& weights) = 0;
  virtual std::string temp_dir() = 0;  // NSTemporaryDirectory()

  // Compile attempts made through this connection. The ANE's compile budget (C9) is the
  // process's, not one driver's: a process has one connection to the framework, which every
  // driver in it shares (make_ane_driver), so every driver counts and reads the same number here.
  std::atomic<int> compile_attempts = 0;

  // The salt of the next model's MIL text (kModelSaltKey, ane_plan.h): unique to this process
  // and, by the count, to the model — so no two models anywhere share a folder.
  std::string next_model_salt() { return process_salt() + "-" + std::to_string(++models_made); }
  std::atomic<uint64_t> models_made = 0;
};

}  // namespace orion::runtime::ane
