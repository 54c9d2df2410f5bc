// The Apple driver's factory, registered as "ane" in driver_registry.cpp. On macOS it is defined in
// ane_driver.mm (dlopen of the private framework; DriverError(NotAvailable) when that fails); on
// every other platform ane_stub.cpp defines it to throw DriverError(NotAvailable).
#pragma once
#include <memory>

#include "runtime/driver.h"

namespace orion::runtime {

std::unique_ptr<Driver> make_ane_driver(const DriverOptions& options);

namespace ane {
class Framework;
// The process's connection to the framework, which every "ane" driver shares (defined with the
// Objective-C half, so only where it is built: macOS, or Linux with ORION_ANE_FAKE; tests call it to
// make the framework calls directly). Throws DriverError(NotAvailable) as make_ane_driver does.
std::shared_ptr<Framework> framework_connection();
}  // namespace ane

}  // namespace orion::runtime
