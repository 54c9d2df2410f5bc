// The fake framework's "hardware": anesim, behind calls that never throw. The C++ exceptions of
// anesim cannot be caught in the fake's Objective-C++ (clang gives code for GCC's Objective-C
// runtime that runtime's personality routine, which lets C++ exceptions pass every catch clause),
// so every call into anesim is made from this plain C++ file and answers with an error text.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/driver.h"

namespace fake_ane {

struct HardwareAnswer {
  std::string error;          // "" when the call succeeded
  bool bad_surfaces = false;  // the hardware's status 0x1d
};

// Compiles with anesim on the default chip, whose compile budget the fake counts itself.
HardwareAnswer hardware_compile(const std::string& mil, const orion::runtime::WeightDict& weights,
                                const std::string& name, std::unique_ptr<orion::runtime::DriverProgram>& out);
HardwareAnswer hardware_load(orion::runtime::DriverProgram& p);
HardwareAnswer hardware_unload(orion::runtime::DriverProgram& p);
HardwareAnswer hardware_evaluate(orion::runtime::DriverProgram& p, std::vector<orion::runtime::Surface>& inputs,
                                 std::vector<orion::runtime::Surface>& outputs);

}  // namespace fake_ane
