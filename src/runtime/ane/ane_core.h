// AneDriver: the Driver of the real ANE, written against the Framework calls of ane_framework.h so
// that everything but the Objective-C lives here and is tested on every machine with a fake.
//
//   compile   MIL must be UTF-8 (C19); the parser reads its bindings (C6); descriptor + model of
//             the text salted for this process and model (kModelSaltKey: no other model, in this
//             process or another, shares its identifier); model.mil and weights/ written under
//             <tmp>/<hexStringIdentifier>; compile, QoS 21;
//             a failure past the chip's budget says so (C9)
//   load      QoS 21, retried once after 100 ms (a slot may still be being reclaimed)
//   evaluate  surfaces checked first (C5, C7, C13, C14 → BadSurfaces, the hardware's 0x1d) and
//             bound in alphabetical order (C6); a framework "status=0x1d" is BadSurfaces too
//   unload    QoS 21; a program destroyed while loaded is unloaded, and its folder removed when
//             no other program shares it
//   weights   the delta reload makes a new descriptor and model for the new weights, whose folder
//             gets the compiled `data` file with the new values patched in, loaded without a
//             compile (C10: rewriting the old folder's weights/*.bin leaves the old weights)
// counters().compiles is the process's count (the framework connection's), not this driver's.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/ane/ane_framework.h"
#include "runtime/ane/ane_plan.h"
#include "runtime/driver.h"

namespace orion::runtime::ane {

class AneDriver final : public Driver {
 public:
  // `framework` is the process's connection, shared by every driver of the process.
  AneDriver(std::shared_ptr<Framework> framework, const DriverOptions& options = {});
  ~AneDriver() override;
  std::string name() const override { return "ane"; }
  const compiler::ChipProfile& chip() const override { return *chip_; }

  std::unique_ptr<DriverProgram> compile(const std::string& mil_text, const WeightDict& weights,
                                         const std::string& name) override;
  void load(DriverProgram& p) override;
  void unload(DriverProgram& p) override;
  void replace_weight_files(DriverProgram& p, const WeightDict& weights) override;
  void evaluate(DriverProgram& p, const std::vector<Surface*>& inputs, const std::vector<Surface*>& outputs) override;
  const DriverCounters& counters() const override;

  struct State;  // shared with the programs, which may outlive the driver

 private:
  class Program;
  Program& own(DriverProgram& p);
  // The text a new model is made of: the caller's with this model's salt in its buildInfo.
  std::string salted(const std::string& mil_text) const;

  const compiler::ChipProfile* chip_;
  mutable DriverCounters counters_;  // compiles: refreshed from the framework's count when read
  std::shared_ptr<State> state_;
};

}  // namespace orion::runtime::ane
