// Items [0, n) shared out to the threads of a parallel region like thread_share (one contiguous run
// each), with work stealing: a thread takes its own run from the front, a step at a time (shorter
// steps as the run's end nears), and when it is done it takes single units from the back of the
// others' runs until nothing is left.
//
// Why: a decode step's threads are not equally fast. On the 2-vCPU Zen 5 VM one core streamed
// memory 8–12% slower than the other, and a decode step, which meets at a barrier after every
// matrix, spent ~20% of the faster thread's time waiting (bench/RESULTS.md). With stealing the
// faster thread finishes the slower one's rows; each owner still walks its run front to back (one
// sequential stream for the hardware prefetcher; the run's start can be fetched early, as
// prefetch_rows does before a barrier), and which thread computes an item never changes its value.
//
// Use: reset() by one thread while no thread takes items (before the parallel region, or between
// two barriers none of whose threads uses it); then every thread calls next() until it is false.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

namespace orion::cpu {

class WorkShares {
 public:
  // n items in units of `unit` (the last unit may be short), over `threads` runs as thread_share
  // splits them.
  void reset(int n, int unit, int threads) {
    n_ = n, unit_ = std::max(1, unit);
    const int units = (n + unit_ - 1) / unit_;
    if (int(runs_.size()) < threads) runs_ = std::vector<Run>(size_t(threads));
    threads_ = threads;
    for (int t = 0; t < threads; t++) runs_[size_t(t)].set(units * t / threads, units * (t + 1) / threads);
  }

  // The calling thread's next items [*first, *last): up to `step` units from the front of its own
  // run, else one unit from the back of another's. False when every item has been taken.
  bool next(int step, int* first, int* last) {
    const int t = omp_get_thread_num() % threads_;
    int u0, u1;
    if (!runs_[size_t(t)].take_front(step, &u0, &u1)) {
      bool stolen = false;
      for (int i = 1; i < threads_ && !stolen; i++) stolen = runs_[size_t((t + i) % threads_)].take_back(&u0, &u1);
      if (!stolen) return false;
    }
    *first = std::min(n_, u0 * unit_), *last = std::min(n_, u1 * unit_);
    return true;
  }

 private:
  // A run of units [front, back), both packed in one word so that the owner and a thief agree
  // on every unit with one compare-and-swap; on its own cache line (no false sharing).
  struct alignas(64) Run {
    std::atomic<uint64_t> word{0};
    static uint64_t pack(uint32_t f, uint32_t b) { return uint64_t(f) << 32 | b; }
    void set(int f, int b) { word.store(pack(uint32_t(f), uint32_t(b)), std::memory_order_relaxed); }
    bool take_front(int step, int* u0, int* u1) {
      uint64_t w = word.load(std::memory_order_relaxed);
      for (;;) {
        const uint32_t f = uint32_t(w >> 32), b = uint32_t(w);
        if (f >= b) return false;
        // Near its end the run is taken in shorter steps, down to single units (as OpenMP's
        // schedule(guided)): a thief that finds nothing left waits at the barrier for the owner's
        // last take, so that take should be short. Stories110M f16 decode on the Zen 5 VM: the
        // faster thread's waits after wo, ffn in and ffn out 170–211 → 114–124 µs a token.
        const uint32_t left = b - f, guided = std::max<uint32_t>(1, left / 4);
        const uint32_t e = f + std::min({left, uint32_t(step), guided});
        if (word.compare_exchange_weak(w, pack(e, b), std::memory_order_relaxed)) return *u0 = int(f), *u1 = int(e), true;
      }
    }
    bool take_back(int* u0, int* u1) {
      uint64_t w = word.load(std::memory_order_relaxed);
      for (;;) {
        const uint32_t f = uint32_t(w >> 32), b = uint32_t(w);
        if (f >= b) return false;
        if (word.compare_exchange_weak(w, pack(f, b - 1), std::memory_order_relaxed)) return *u0 = int(b - 1), *u1 = int(b), true;
      }
    }
  };
  std::vector<Run> runs_;
  int n_ = 0, unit_ = 1, threads_ = 1;
};

}  // namespace orion::cpu
