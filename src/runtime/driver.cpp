// DriverError: a Runtime error whose message starts with the hardware status it carries.
#include "runtime/driver.h"

#include <fmt/format.h>

namespace orion::runtime {

namespace {

const char* status_name(DriverStatus s) {
  switch (s) {
    case DriverStatus::CompileFailed: return "compile failed";
    case DriverStatus::LoadFailed: return "load failed";
    case DriverStatus::EvalFailed: return "evaluation failed";
    case DriverStatus::BadSurfaces: return "evaluation failed with status 0x1d (bad surfaces)";
    case DriverStatus::NotAvailable: return "not available";
  }
  return "driver error";
}

}  // namespace

DriverError::DriverError(DriverStatus status, const std::string& message, const std::string& hint)
    : Error(ErrorKind::Runtime, fmt::format("{}: {}", status_name(status), message), {{}, {}, -1, hint}), status_(status) {}

}  // namespace orion::runtime
