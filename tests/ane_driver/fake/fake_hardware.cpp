// The fake framework's hardware: see fake_hardware.h.
#include "fake_hardware.h"

#include "compiler/chip.h"
#include "runtime/anesim/anesim_driver.h"

namespace rt = orion::runtime;

namespace fake_ane {
namespace {

rt::Driver& hardware() {
  static orion::compiler::ChipProfile chip = [] {
    orion::compiler::ChipProfile c = orion::compiler::default_chip();
    c.compile_budget = 1 << 30;  // the fake fails past the budget itself, silently, as the hardware does
    return c;
  }();
  static std::unique_ptr<rt::Driver> d = rt::anesim::make_anesim_driver({&chip, false});
  return *d;
}

template <typename F>
HardwareAnswer answer(F&& call) noexcept {
  try {
    call();
    return {};
  } catch (const rt::DriverError& e) {
    return {e.what(), e.status() == rt::DriverStatus::BadSurfaces};
  } catch (const std::exception& e) {
    return {e.what(), false};
  }
}

}  // namespace

HardwareAnswer hardware_compile(const std::string& mil, const rt::WeightDict& weights, const std::string& name,
                                std::unique_ptr<rt::DriverProgram>& out) {
  return answer([&] { out = hardware().compile(mil, weights, name); });
}
HardwareAnswer hardware_load(rt::DriverProgram& p) {
  return answer([&] { hardware().load(p); });
}
HardwareAnswer hardware_unload(rt::DriverProgram& p) {
  return answer([&] { hardware().unload(p); });
}
HardwareAnswer hardware_evaluate(rt::DriverProgram& p, std::vector<rt::Surface>& inputs,
                                 std::vector<rt::Surface>& outputs) {
  return answer([&] {
    std::vector<rt::Surface*> in, out;
    for (auto& s : inputs) in.push_back(&s);
    for (auto& s : outputs) out.push_back(&s);
    hardware().evaluate(p, in, out);
  });
}

}  // namespace fake_ane
