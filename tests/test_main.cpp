// The main() of every test program: GoogleTest's, plus one rule for runs on a forced instruction
// set. ctest runs the numerics tests once per kernel path (tests/CMakeLists.txt: ORION_ISA=generic,
// avx2, avx512). On a CPU that lacks the one asked for, the kernels would silently take the best
// path the CPU has and the run would prove nothing about the path in its name: its tests are
// skipped instead, saying why.
#include <gtest/gtest.h>

#include "runtime/cpu/kernels.h"

namespace {

class RequestedIsaEnvironment : public testing::Environment {
 public:
  void SetUp() override {
    const std::string& why = orion::cpu::isa_request_refused();
    if (!why.empty()) GTEST_SKIP() << why << " — this run's tests are skipped";
  }
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  testing::AddGlobalTestEnvironment(new RequestedIsaEnvironment);
  return RUN_ALL_TESTS();
}
