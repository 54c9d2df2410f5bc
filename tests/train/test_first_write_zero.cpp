// train/cpu/first_write_zero: gradients zeroed by their first write — what zero_gradients leaves
// pending, that the product's first_write takes it once, that whatever no product wrote is zeroed by
// finish_gradients or forget_gradients, and the conservative answers to ranges that do not match.
#include "train/cpu/first_write_zero.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

using namespace orion::train;

namespace {

// Whether g[b, e) all equal v.
bool all(const std::vector<float>& g, size_t b, size_t e, float v) {
  for (size_t i = b; i < e; i++)
    if (g[i] != v) return false;
  return true;
}

struct Buffer {  // a gradient buffer that is forgotten whatever the test does
  std::vector<float> g = std::vector<float>(1000, 5.0f);
  ~Buffer() { forget_gradients(g.data(), g.size()); }
  // A step's gradients (7 everywhere), then the next step's zero_grad.
  void next_step() {
    std::fill(g.begin(), g.end(), 7.0f);
    zero_gradients(g.data(), g.size());
  }
};

}  // namespace

TEST(FirstWriteZero, ANotedRangeIsLeftPendingAndOverwrittenOnce) {
  Buffer b;
  std::vector<float>& g = b.g;
  zero_gradients(g.data(), g.size());
  EXPECT_TRUE(all(g, 0, 1000, 0.0f)) << "the first zeroing zeroes everything";
  EXPECT_FALSE(first_write(g.data() + 100, 200)) << "not pending yet: the product adds (and the range is noted)";
  EXPECT_FALSE(gradients_pending());
  b.next_step();  // last step's gradients, then zero_grad
  EXPECT_TRUE(all(g, 0, 100, 0.0f) && all(g, 300, 1000, 0.0f)) << "around the noted range: zeroed";
  EXPECT_TRUE(all(g, 100, 300, 7.0f)) << "the noted range is left to its product";
  EXPECT_TRUE(gradients_pending());
  EXPECT_TRUE(first_write(g.data() + 100, 200)) << "pending: the product overwrites it";
  EXPECT_FALSE(gradients_pending());
  EXPECT_FALSE(first_write(g.data() + 100, 200)) << "a second product into it (accumulation) adds";
  finish_gradients(g.data(), g.size());
  EXPECT_TRUE(all(g, 100, 300, 7.0f)) << "finish leaves a written range alone";
}

TEST(FirstWriteZero, WhatNoProductWroteIsZeroedAtTheEnd) {
  Buffer b;
  std::vector<float>& g = b.g;
  zero_gradients(g.data(), g.size());
  first_write(g.data() + 10, 20);
  first_write(g.data() + 500, 100);
  b.next_step();
  EXPECT_TRUE(first_write(g.data() + 500, 100));
  finish_gradients(g.data(), g.size());  // a backward that skipped the first product
  EXPECT_FALSE(gradients_pending());
  EXPECT_TRUE(all(g, 10, 30, 0.0f)) << "the unwritten pending range is zeroed";
  EXPECT_TRUE(all(g, 500, 600, 7.0f)) << "the written one is the product's";
  b.next_step();
  forget_gradients(g.data(), g.size());  // the model goes away mid-step
  EXPECT_FALSE(gradients_pending());
  EXPECT_TRUE(all(g, 10, 30, 0.0f) && all(g, 500, 600, 0.0f)) << "forgetting zeroes what was pending";
  b.next_step();
  EXPECT_TRUE(all(g, 0, 1000, 0.0f)) << "forgotten ranges are zeroed like the rest";
}

TEST(FirstWriteZero, RangesThatDoNotMatchAreNeverOverwritten) {
  Buffer b;
  std::vector<float>& g = b.g;
  zero_gradients(g.data(), g.size());
  first_write(g.data() + 100, 200);
  b.next_step();
  EXPECT_FALSE(first_write(g.data() + 150, 100)) << "overlapping a pending range: add";
  EXPECT_TRUE(all(g, 100, 300, 0.0f)) << "… into zeros: the pending range was zeroed and forgotten";
  EXPECT_FALSE(gradients_pending());
  std::vector<float> other(50, 3.0f);
  EXPECT_FALSE(first_write(other.data(), 50)) << "outside every zeroed buffer: add, and nothing is noted";
  b.next_step();
  EXPECT_TRUE(all(g, 0, 1000, 0.0f));
  EXPECT_TRUE(all(other, 0, 50, 3.0f));
}

TEST(FirstWriteZero, SwitchedOffEveryZeroingIsComplete) {
  Buffer b;
  std::vector<float>& g = b.g;
  zero_gradients(g.data(), g.size());
  first_write(g.data() + 100, 200);
  std::fill(g.begin(), g.end(), 7.0f);
  setenv("ORION_FIRST_WRITE_ZERO", "0", 1);
  zero_gradients(g.data(), g.size());
  unsetenv("ORION_FIRST_WRITE_ZERO");
  EXPECT_TRUE(all(g, 0, 1000, 0.0f));
  EXPECT_FALSE(gradients_pending());
  EXPECT_FALSE(first_write(g.data() + 100, 200));
}
