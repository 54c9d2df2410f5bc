// Counting compiles against the chip's budget (C9).
#include "runtime/compile_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

namespace orion::runtime {

CompileBudget::CompileBudget(int limit) : limit_(limit) {
  ORION_CHECK(limit > 0, "a compile budget needs a positive limit, not {}", limit);
}

CompileBudget CompileBudget::for_driver(const Driver& driver) {
  CompileBudget b(driver.chip().compile_budget);
  b.used_ = driver.counters().compiles;
  return b;
}

void CompileBudget::charge(const std::string& program, const Driver* driver) {
  if (driver) used_ = std::max(used_, driver->counters().compiles);
  if (used_ >= limit_)
    throw_runtime_error(
        fmt::format("compile budget spent: {} of {} ANE compiles used in this process; compiling '{}' would fail "
                    "silently on the hardware (C9)",
                    used_, limit_, program),
        {},
        "reuse compiled programs (the program cache), update weights as inputs instead of recompiling, or continue in a new process");
  used_++;
  if (!warned_ && used_ >= warn_at()) {
    warned_ = true;
    std::fprintf(stderr,
                 "warning: %d of %d ANE compiles used in this process (C9: compiles beyond the budget fail silently; "
                 "Orion will refuse them)\n",
                 used_, limit_);
  }
}

std::string CompileBudget::str() const { return fmt::format("compiles {}/{} ({} left)", used_, limit_, remaining()); }

}  // namespace orion::runtime
