// Drivers by name. A backend is one folder under runtime/ plus one row in kBackends below.
#include <fmt/format.h>

#include "runtime/driver.h"

namespace orion::runtime {

// ---- factories of the backends (each defined in its own folder) ---------------------------------
std::unique_ptr<Driver> make_ane_driver(const DriverOptions& options);  // runtime/ane/
namespace anesim {
std::unique_ptr<Driver> make_anesim_driver(const DriverOptions& options);
}  // namespace anesim

namespace {

struct Backend {
  const char* name;
  std::unique_ptr<Driver> (*make)(const DriverOptions&);
};

// The software ANE exists everywhere, the Apple driver on macOS. Elsewhere "ane" is not listed, but
// make_driver still asks make_ane_driver, which says it is unavailable — unless ORION_ANE_FRAMEWORK
// names the test fake of the framework (runtime/ane/ane_module.cpp).
const Backend kBackends[] = {
    {"anesim", &anesim::make_anesim_driver},
#if defined(__APPLE__)
    {"ane", &make_ane_driver},
#endif
    {nullptr, nullptr},  // end marker (keeps the array non-empty whatever is compiled in)
};

}  // namespace

std::vector<std::string> driver_names() {
  std::vector<std::string> names;
  for (const Backend& b : kBackends)
    if (b.name) names.push_back(b.name);
  return names;
}

std::unique_ptr<Driver> make_driver(const std::string& name, const DriverOptions& options) {
  for (const Backend& b : kBackends)
    if (b.name && name == b.name) return b.make(options);
  if (name == "ane") return make_ane_driver(options);  // off macOS: NotAvailable, or the test fake
  throw_usage_error(fmt::format("no ANE driver named '{}' (available: {})", name, fmt::join(driver_names(), ", ")),
                    "--backend", "use --backend anesim or cpu");
}

}  // namespace orion::runtime
