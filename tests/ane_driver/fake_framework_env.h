// The tests of tests/ane_driver/ run the Apple driver's real Objective-C++ (ane_driver.mm) against
// the fake framework of fake/ — on Linux builds with ORION_ANE_FAKE. use_fake_framework() points the
// driver (this process's and the orion processes it starts) at the fake before the driver's first
// use; ORION_REQUIRE_FAKE_FRAMEWORK skips a test, saying why, where the fake is not built.
#pragma once
#include <gtest/gtest.h>

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

}  // namespace orion::test

#define ORION_REQUIRE_FAKE_FRAMEWORK()                                                                   \
  if (!orion::test::use_fake_framework())                                                                \
  GTEST_SKIP() << "the Apple driver is not built against the fake framework here (ORION_ANE_FAKE needs " \
                  "clang++ and libgnustep-base-dev: scripts/setup.sh)"
