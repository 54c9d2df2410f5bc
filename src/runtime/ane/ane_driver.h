// The Apple driver's factory, registered as "ane" in driver_registry.cpp. On macOS it is defined in
// ane_driver.mm (dlopen of the private framework; DriverError(NotAvailable) when that fails); on
// every other platform ane_stub.cpp defines it to throw DriverError(NotAvailable).
#pragma once
#include <memory>

#include "runtime/driver.h"

namespace orion::runtime {

std::unique_ptr<Driver> make_ane_driver(const DriverOptions& options);

}  // namespace orion::runtime
