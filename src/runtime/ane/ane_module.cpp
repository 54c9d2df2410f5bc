// make_ane_driver off macOS, where there is no AppleNeuralEngine.framework. Without
// ORION_ANE_FRAMEWORK it is NotAvailable, saying so. With it — the tests, naming the fake of the
// framework (tests/ane_driver/) — the driver's Objective-C half is opened as a module of its own
// (kDriverModuleEnv: liborion_ane_driver.so, built with ORION_ANE_FAKE), so that the orion binary
// links no Objective-C runtime and a Linux build never depends on GNUstep; the driver logic
// (ane_core.cpp) is orion's own.
#include <dlfcn.h>

#include <cstdlib>

#include <fmt/format.h>

#include "runtime/ane/ane_core.h"
#include "runtime/ane/ane_driver.h"
#include "runtime/ane/ane_plan.h"

#if !defined(__APPLE__)

namespace orion::runtime {
namespace ane {
namespace {

// The module's connection to the framework, or why there is none: opened once per process.
struct ModuleConnection {
  std::shared_ptr<Framework> framework;
  std::string why;
};

ModuleConnection open_module() {
  const char* path = std::getenv(kDriverModuleEnv);
  if (!path || !*path)
    return {nullptr, fmt::format("{} names a framework, but off macOS the driver's Objective-C half is a module "
                                 "of its own and {} names none",
                                 kFrameworkPathEnv, kDriverModuleEnv)};
  void* module = dlopen(path, RTLD_NOW | RTLD_LOCAL);  // kept open for the process
  if (!module) {
    const char* why = dlerror();
    return {nullptr, fmt::format("cannot load the driver module {}: {}", path, why ? why : "unknown reason")};
  }
  using Connect = bool (*)(std::shared_ptr<Framework>*, std::string*);
  auto connect = reinterpret_cast<Connect>(dlsym(module, kDriverModuleEntry));
  if (!connect) return {nullptr, fmt::format("the driver module {} lacks {}", path, kDriverModuleEntry)};
  ModuleConnection c;
  if (!connect(&c.framework, &c.why)) c.framework = nullptr;
  return c;
}

}  // namespace

std::shared_ptr<Framework> framework_connection() {
  const char* framework = std::getenv(kFrameworkPathEnv);
  if (!framework || !*framework) throw not_available_off_macos();
  static const ModuleConnection connection = open_module();
  if (!connection.framework)
    throw DriverError(DriverStatus::NotAvailable, "the 'ane' driver is not available: " + connection.why,
                      "use --backend anesim (the software ANE) or --backend cpu");
  return connection.framework;
}

}  // namespace ane

std::unique_ptr<Driver> make_ane_driver(const DriverOptions& options) {
  return std::make_unique<ane::AneDriver>(ane::framework_connection(), options);
}

}  // namespace orion::runtime

#endif
