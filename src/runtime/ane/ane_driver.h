// The Apple driver's factory, registered as "ane" in driver_registry.cpp. On macOS it is defined in
// ane_driver.mm (dlopen of the private framework; DriverError(NotAvailable) when that fails), and so
// it is on Linux builds with ORION_ANE_FAKE, where it is NotAvailable unless ORION_ANE_FRAMEWORK
// names the test fake of the framework (tests/ane_driver/); elsewhere ane_stub.cpp defines it to
// throw DriverError(NotAvailable).
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
