// The Apple driver's factory, registered as "ane" in driver_registry.cpp. On macOS it is defined in
// ane_driver.mm (dlopen of the private framework; DriverError(NotAvailable) when that fails).
// Elsewhere ane_module.cpp defines it: NotAvailable, unless ORION_ANE_FRAMEWORK names the test fake
// of the framework and ORION_ANE_DRIVER_MODULE the driver's Objective-C half built as a module
// (tests/ane_driver/).
#pragma once
#include <memory>

#include "runtime/driver.h"

namespace orion::runtime {

std::unique_ptr<Driver> make_ane_driver(const DriverOptions& options);

namespace ane {
class Framework;
// The process's connection to the framework, which every "ane" driver shares (tests call it to make
// the framework calls directly). Throws DriverError(NotAvailable) as make_ane_driver does.
std::shared_ptr<Framework> framework_connection();
}  // namespace ane

}  // namespace orion::runtime
