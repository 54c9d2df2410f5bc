// make_ane_driver where there is no AppleNeuralEngine.framework: every platform but macOS, unless
// the driver is built against the test fake (ORION_ANE_FAKE, ane.cmake).
#include "runtime/ane/ane_driver.h"
#include "runtime/ane/ane_plan.h"

#if !defined(__APPLE__) && !defined(ORION_ANE_DRIVER_BUILT)

namespace orion::runtime {

std::unique_ptr<Driver> make_ane_driver(const DriverOptions&) { throw ane::not_available_off_macos(); }

std::shared_ptr<ane::Framework> ane::framework_connection() { throw not_available_off_macos(); }

}  // namespace orion::runtime

#endif
