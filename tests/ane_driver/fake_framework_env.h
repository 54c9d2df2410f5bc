// The tests of tests/ane_driver/ run the Apple driver's real Objective-C++ (ane_driver.mm) against
// the fake framework of fake/ — on Linux builds with ORION_ANE_FAKE. use_fake_framework() points the
// driver (this process's and the orion processes it starts) at the fake before the driver's first
// use; ORION_REQUIRE_FAKE_FRAMEWORK skips a test, saying why, where the fake is not built.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>

namespace orion::test {

inline bool use_fake_framework() {
#ifdef ORION_ANE_FAKE_LIBRARY
  setenv("ORION_ANE_FRAMEWORK", ORION_ANE_FAKE_LIBRARY, 1);
  return true;
#else
  return false;
#endif
}

// Programs are identified by their text and weights, and two processes that compile the same one
// share its folder under the temporary directory (ctest -j runs test processes side by side): tests
// that remove or inspect folders scale their weights by this, different in each process.
inline float process_scale() { return 1.0f + float(getpid() % 997) / 4096.0f; }

}  // namespace orion::test

#define ORION_REQUIRE_FAKE_FRAMEWORK()                                                                   \
  if (!orion::test::use_fake_framework())                                                                \
  GTEST_SKIP() << "the Apple driver is not built against the fake framework here (ORION_ANE_FAKE needs " \
                  "clang++ and libgnustep-base-dev: scripts/setup.sh)"
