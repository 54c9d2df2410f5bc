// The compile budget (DESIGN.md §2, rule C9): the ANE compiles ~119 programs per process and then
// fails further compiles silently — the program "compiles" and computes nothing useful. Orion
// therefore counts every compile before it happens and refuses, with an error that says why, the
// first compile the hardware would no longer do; it warns once when 90% of the budget is spent.
//
// The count follows the driver too: a compile made outside this budget (another cache, a tool)
// still shows in Driver::counters().compiles, and charge() adopts the larger of the two counts.
#pragma once
#include <string>

#include "runtime/driver.h"

namespace orion::runtime {

class CompileBudget {
 public:
  // `limit` compiles are allowed in this process (ChipProfile::compile_budget).
  explicit CompileBudget(int limit);
  // The budget of the driver's chip, starting from the compiles the driver has already made.
  static CompileBudget for_driver(const Driver& driver);

  // Call before every compile of `program`: counts it, or throws a Runtime error when the budget
  // is spent (nothing is counted then). Prints one warning to stderr when the count reaches 90%.
  void charge(const std::string& program, const Driver* driver = nullptr);

  int limit() const { return limit_; }
  int used() const { return used_; }
  int remaining() const { return limit_ > used_ ? limit_ - used_ : 0; }
  bool warned() const { return warned_; }
  // The count at which the warning is printed: 90% of the limit, rounded up.
  int warn_at() const { return (limit_ * 9 + 9) / 10; }
  std::string str() const;  // "compiles 12/119 (107 left)"

 private:
  int limit_;
  int used_ = 0;
  bool warned_ = false;
};

}  // namespace orion::runtime
