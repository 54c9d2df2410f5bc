// The program cache (DESIGN.md §3): compiled programs kept loaded and found again by
// (model, kernel, layer, sequence bucket, weights version), so each is compiled once per process —
// compiles are slow (~40 ms each) and limited (C9). A slot is (model, kernel, layer, bucket); it
// holds one weights version at a time: asking for another version (after a training step, a new
// adapter) compiles it and evicts — unloads — the program it replaces. Generation looks its
// programs up here on every call (infer/ane_model.h); training's programs are UpdatableKernels in
// the slots of the training program list (weight_update.h, train/ane/ane_blocks.h).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/ane_kernel.h"
#include "runtime/compile_budget.h"
#include "runtime/driver.h"

namespace orion::runtime {

struct ProgramKey {
  std::string model;   // "gpt2-124m", "stories15m", ...
  std::string kernel;  // "gpt2_prefill_attn", ...
  int layer = -1;      // −1 for whole-model kernels
  int bucket = 0;      // sequence bucket S the program is built for
  uint64_t weights_version = 0;
  std::string str() const;  // "gpt2-124m/gpt2_prefill_attn/layer3/S64/v0"
};

struct CacheStats {
  int64_t hits = 0, misses = 0, evictions = 0;
  int64_t resident = 0;     // programs loaded now
  double compile_s = 0;     // time spent compiling on misses
  std::string str() const;  // one line for --verbose and `orion bench`
};

class ProgramCache {
 public:
  ProgramCache(Driver& driver, CompileBudget& budget) : driver_(driver), budget_(budget) {}

  // The program for `key`: the resident one (a hit), or `build()` compiled and loaded now (a
  // miss), replacing and unloading a program of another weights version in the same slot (an
  // eviction). The kernel stays usable by whoever holds it until it is evicted or cleared.
  std::shared_ptr<AneKernel> get(const ProgramKey& key, const std::function<ir::Graph()>& build);
  // The resident program for `key` (same weights version), or nullptr; changes no statistics.
  std::shared_ptr<AneKernel> find(const ProgramKey& key) const;
  void clear();                          // unloads every program
  std::vector<ProgramKey> keys() const;  // the resident programs, in slot order

  CacheStats stats() const;
  Driver& driver() { return driver_; }
  CompileBudget& budget() { return budget_; }

 private:
  using Slot = std::tuple<std::string, std::string, int, int>;  // model, kernel, layer, bucket
  struct Entry {
    uint64_t weights_version = 0;
    std::shared_ptr<AneKernel> kernel;
  };
  static Slot slot_of(const ProgramKey& k) { return {k.model, k.kernel, k.layer, k.bucket}; }

  Driver& driver_;
  CompileBudget& budget_;
  std::map<Slot, Entry> entries_;
  CacheStats stats_;
};

}  // namespace orion::runtime
