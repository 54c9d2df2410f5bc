// WorkShares (runtime/cpu/work_shares.h): every item is handed out exactly once, in whole units,
// whatever the number of threads; a thread's own run comes front to back; a thread that is done
// takes what a slower one has not started.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/cpu/work_shares.h"

namespace orion::cpu {
namespace {

TEST(WorkShares, EveryItemOnceInWholeUnitsWhateverTheThreads) {
  for (int threads : {1, 2, 3, 4})
    for (int n : {0, 1, 15, 16, 17, 1000})
      for (int unit : {1, 16})
        for (int step : {1, 4}) {
          WorkShares shares;
          shares.reset(n, unit, threads);
          std::vector<std::atomic<int>> taken(static_cast<size_t>(n));
          std::atomic<int> bad{0};
#pragma omp parallel num_threads(threads)
          {
            int first, last, previous_own = -1;
            while (shares.next(step, &first, &last)) {
              if (first < 0 || last > n || first >= last || first % unit != 0 || (last != n && last % unit != 0) ||
                  last - first > step * unit)
                bad++;
              for (int i = first; i < last; i++) taken[size_t(i)]++;
              // The thread's own run (as thread_share splits it) comes front to back.
              const int units = (n + unit - 1) / unit, t = omp_get_thread_num(), nt = omp_get_num_threads();
              if (first >= units * t / nt * unit && first < units * (t + 1) / nt * unit) {
                if (first <= previous_own) bad++;
                previous_own = first;
              }
            }
          }
          EXPECT_EQ(bad.load(), 0) << threads << " threads, n " << n << ", unit " << unit << ", step " << step;
          for (int i = 0; i < n; i++)
            ASSERT_EQ(taken[size_t(i)].load(), 1) << "item " << i << ": " << threads << " threads, n " << n << ", unit "
                                                  << unit << ", step " << step;
        }
}

// Thread 1 starts only once thread 0 has nothing left to take: thread 0 must have taken thread
// 1's whole run as well as its own.
TEST(WorkShares, AThreadThatIsDoneTakesTheOthersUnits) {
  WorkShares shares;
  shares.reset(640, 16, 2);
  std::atomic<bool> first_done{false};
  std::vector<int> count(2, 0);
#pragma omp parallel num_threads(2)
  {
    if (omp_get_num_threads() == 2) {
      const int t = omp_get_thread_num();
      if (t == 1)
        while (!first_done.load()) std::this_thread::yield();
      int first, last;
      while (shares.next(4, &first, &last)) count[size_t(t)] += last - first;
      if (t == 0) first_done = true;
    }
  }
  if (count[0] + count[1] == 0) GTEST_SKIP() << "OpenMP gave this region one thread";
  EXPECT_EQ(count[0], 640);
  EXPECT_EQ(count[1], 0);
}

// A thief that finds nothing left waits for the owner's last take, so the owner's steps shrink as
// its run's end nears: never longer than asked, never longer than the one before, and the last
// ones a single unit each.
TEST(WorkShares, TheOwnersStepsShrinkToOneUnitAtTheEndOfItsRun) {
  WorkShares shares;
  shares.reset(64 * 16, 16, 1);  // one thread: its own run is all 64 units
  std::vector<int> steps;
  int first, last;
  while (shares.next(4, &first, &last)) steps.push_back((last - first) / 16);
  ASSERT_GE(steps.size(), 16u);
  EXPECT_EQ(steps.front(), 4);
  for (size_t i = 1; i < steps.size(); i++) EXPECT_LE(steps[i], steps[i - 1]) << "step " << i;
  EXPECT_EQ(steps.back(), 1);
  EXPECT_EQ(steps[steps.size() - 2], 1);
}

}  // namespace
}  // namespace orion::cpu
