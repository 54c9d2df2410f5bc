// make_ane_driver where there is no AppleNeuralEngine.framework: every platform but macOS.
#include "runtime/ane/ane_driver.h"

#ifndef __APPLE__

namespace orion::runtime {

std::unique_ptr<Driver> make_ane_driver(const DriverOptions&) {
  throw DriverError(DriverStatus::NotAvailable,
                    "the 'ane' driver is not available on this platform: the Apple Neural Engine is reached "
                    "through macOS's private AppleNeuralEngine.framework",
                    "use --backend anesim (the software ANE, same programs and rules) or --backend cpu");
}

}  // namespace orion::runtime

#endif
