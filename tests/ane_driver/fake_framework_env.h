// The tests of tests/ane_driver/ run the Apple driver's real Objective-C++ (ane_driver.mm) against
// the fake framework of fake/ — on Linux builds with ORION_ANE_FAKE. use_fake_framework() points the
// driver (this process's and the orion processes it starts) at the fake, and at the module the
// driver's Objective-C++ is built into, before the driver's first use; ORION_REQUIRE_FAKE_FRAMEWORK skips a test, saying why, where the fake is not built.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "runtime/ane/ane_plan.h"

namespace orion::test {

inline bool use_fake_framework() {
#ifdef ORION_ANE_FAKE_LIBRARY
  setenv("ORION_ANE_FRAMEWORK", ORION_ANE_FAKE_LIBRARY, 1);
  setenv("ORION_ANE_DRIVER_MODULE", ORION_ANE_DRIVER_LIBRARY, 1);  // off macOS the driver's .mm is a module
  return true;
#else
  return false;
#endif
}

// Programs are identified by their text and weights, and two processes that compile the same one
// share its folder under the temporary directory (ctest -j runs test processes side by side). The
// driver makes every model's text its own (kModelSaltKey); tests that hand the framework a program
// directly, and remove or inspect its folder, make it this process's own the same way — the weights
// alone may not separate programs (the framework hashes one value per weight entry) — and scale
// their weights by process_scale().
inline std::string process_own(const std::string& mil_text) {
  return runtime::ane::with_build_info_entry(mil_text, "orion-test-process", std::to_string(getpid()));
}
// Set, the fake's unload removes the model's folder, as a decompiled copy of the framework does
// (read by fake/fake_framework.mm at every unload).
inline constexpr const char* kFakeUnloadRemovesFolderEnv = "ORION_FAKE_ANE_UNLOAD_REMOVES_FOLDER";

inline float process_scale() { return 1.0f + float(getpid() % 997) / 4096.0f; }

}  // namespace orion::test

#define ORION_REQUIRE_FAKE_FRAMEWORK()                                                                   \
  if (!orion::test::use_fake_framework())                                                                \
  GTEST_SKIP() << "the Apple driver is not built against the fake framework here (ORION_ANE_FAKE needs " \
                  "clang++ and libgnustep-base-dev: scripts/setup.sh)"
