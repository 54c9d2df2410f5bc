// train/loop/loss_scaler: parsing, a dynamic scale's back-off on overflow (the step skipped), its
// growth after the window of clean steps, its bounds, a fixed scale, and unscaling.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/error.h"
#include "train/loop/loss_scaler.h"

using namespace orion;
using namespace orion::train;

TEST(LossScaler, Parses) {
  EXPECT_FALSE(LossScaler::parse("none").enabled());
  EXPECT_EQ(LossScaler::parse("none").scale(), 1.0f);
  const LossScaler d = LossScaler::parse("dynamic", 10);
  EXPECT_EQ(d.mode(), LossScaler::Mode::Dynamic);
  EXPECT_EQ(d.scale(), LossScaler::kInitialScale);
  EXPECT_EQ(d.growth_interval(), 10);
  EXPECT_EQ(LossScaler::parse("1024").scale(), 1024.0f);
  EXPECT_EQ(LossScaler::parse("1024").mode(), LossScaler::Mode::Fixed);
  for (const char* bad : {"", "0", "-4", "abc", "12x", "inf", "1e30"})
    EXPECT_THROW(LossScaler::parse(bad), Error) << bad;
  EXPECT_THROW(LossScaler::parse("dynamic", 0), Error);
}

TEST(LossScaler, OverflowSkipsAndHalves) {
  LossScaler s = LossScaler::parse("dynamic", 3);
  EXPECT_TRUE(s.update(true));
  EXPECT_FALSE(s.update(false)) << "a non-finite gradient skips the step";
  EXPECT_EQ(s.scale(), LossScaler::kInitialScale / 2);
  EXPECT_TRUE(s.overflow_is_recoverable());
  EXPECT_EQ(s.overflows(), 1);
  EXPECT_TRUE(s.update(true));
  EXPECT_FALSE(s.overflow_is_recoverable());
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), LossScaler::kInitialScale / 2) << "the overflow reset the count of clean steps";
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), LossScaler::kInitialScale) << "3 clean steps in a row double it";
}

TEST(LossScaler, GrowsAfterTheWindowUpToTheMaximum) {
  LossScaler s = LossScaler::parse("dynamic", 2);
  for (int i = 0; i < 2; i++) s.update(true);
  EXPECT_EQ(s.scale(), 2 * LossScaler::kInitialScale);
  for (int i = 0; i < 100; i++) s.update(true);
  EXPECT_EQ(s.scale(), LossScaler::kMaxScale);
}

TEST(LossScaler, BacksOffDownToTheMinimumThenStopsRecovering) {
  LossScaler s = LossScaler::parse("dynamic", 5);
  int halvings = 0;
  while (s.scale() > LossScaler::kMinScale) {
    EXPECT_FALSE(s.update(false));
    EXPECT_TRUE(s.overflow_is_recoverable());
    ++halvings;
  }
  EXPECT_EQ(halvings, 16) << "2^16 down to 1";
  EXPECT_FALSE(s.update(false));
  EXPECT_FALSE(s.overflow_is_recoverable()) << "at the minimum a non-finite gradient is a bad step";
  EXPECT_EQ(s.scale(), LossScaler::kMinScale);
}

TEST(LossScaler, FixedAndNoneNeverMove) {
  LossScaler f = LossScaler::parse("512", 1);
  EXPECT_FALSE(f.update(false));
  EXPECT_FALSE(f.overflow_is_recoverable());
  EXPECT_TRUE(f.update(true));
  EXPECT_EQ(f.scale(), 512.0f);
  LossScaler n = LossScaler::parse("none");
  EXPECT_TRUE(n.update(true));
  EXPECT_FALSE(n.update(false));
  EXPECT_EQ(n.scale(), 1.0f);
}

TEST(LossScaler, UnscalesAndFindsNonFinite) {
  std::vector<float> g(200000, 3.0f * 1024);
  EXPECT_TRUE(unscale_and_check(g.data(), g.size(), 1024.0f));
  EXPECT_EQ(g[0], 3.0f);
  EXPECT_EQ(g.back(), 3.0f);
  g[123456] = INFINITY;
  EXPECT_FALSE(unscale_and_check(g.data(), g.size(), 2.0f));
  g[123456] = NAN;
  EXPECT_FALSE(unscale_and_check(g.data(), g.size(), 2.0f));
}
