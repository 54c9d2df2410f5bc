// anesim: the software ANE — the executable specification of what the ANE accepts and computes
// (DESIGN.md §1, §2, §6). It takes the very MIL text and weight dictionary the Apple driver hands
// to the framework and behaves as the hardware does, failures included:
//   compile   checks the text against the public definitions with code of its own: UTF-8 (C19),
//             program/opset versions for the chip (C18), op signatures (mil_signatures.h), every
//             BLOBFILE constant read with a storage reader written from the public coremltools
//             layout (blobfile_check.h; C8); runs sdpa with its mask ignored (C15,
//             sdpa_as_hardware.h); then parses the MIL with the compiler's parser and rejects what
//             the ANE compiler
//             rejects for the chip profile (validate-ane's rules: C1 concat, C2 gelu, C4 conv bias,
//             C12 wide convs, C16 > 16 blobs, C7/C14 boundaries, C17/C18 per chip); counts compiles
//             against the chip's budget and fails past it (C9); copies the weights (C10);
//   load      builds the execution plan (anesim_plan.h) from the compile-time weights — or, only
//             when DriverOptions::reload_takes_effect, from weight files replaced since (C10);
//   evaluate  enforces the surface rules (status 0x1d: C5, C7, C13; data fits), binds surfaces in
//             alphabetical order (C6), reads and writes packed fp16 from byte 0 (C14), computes in
//             fp16 and adds the predicted ANE time to counters() (anesim_timing.h).
// One AnesimDriver models one process's connection to the ANE: its compile budget is per driver.
#pragma once
#include <memory>

#include "runtime/anesim/anesim_timing.h"
#include "runtime/driver.h"

namespace orion::runtime::anesim {

class AnesimDriver final : public Driver {
 public:
  explicit AnesimDriver(const DriverOptions& options = {});
  std::string name() const override { return "anesim"; }
  const compiler::ChipProfile& chip() const override { return *chip_; }

  std::unique_ptr<DriverProgram> compile(const std::string& mil_text, const WeightDict& weights,
                                         const std::string& name) override;
  void load(DriverProgram& p) override;
  void unload(DriverProgram& p) override;
  void replace_weight_files(DriverProgram& p, const WeightDict& weights) override;
  void evaluate(DriverProgram& p, const std::vector<Surface*>& inputs, const std::vector<Surface*>& outputs) override;
  const DriverCounters& counters() const override { return counters_; }

  // What p's latest evaluation would have taken on the ANE (the figure evaluate added to
  // counters()); before any, what a first evaluation would take (weights not resident).
  TimingBreakdown predicted(const DriverProgram& p) const;
  const ProgramCost& cost(const DriverProgram& p) const;
  // The timing model's compile and load times of every compile() and load() so far.
  double predicted_compile_ms() const { return predicted_compile_ms_; }
  double predicted_load_ms() const { return predicted_load_ms_; }

 private:
  const compiler::ChipProfile* chip_;
  DriverOptions options_;
  DriverCounters counters_;
  int programs_compiled_ = 0;
  int last_evaluated_ = 0;  // serial of the program evaluated last (its weights may be in SRAM)
  double predicted_compile_ms_ = 0, predicted_load_ms_ = 0;
};

std::unique_ptr<Driver> make_anesim_driver(const DriverOptions& options = {});

}  // namespace orion::runtime::anesim
