#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "base/error.h"
#include "infer/sampler.h"

namespace orion {

TEST(Sampler, GreedyPicksArgmax) {
  std::vector<float> lg = {0.1f, 3.0f, -1.0f, 2.9f};
  Sampler s({0.0f, 0.9f, 0, 1});
  EXPECT_EQ(s.sample(lg.data(), 4), 1);
}

TEST(Sampler, SameSeedSameSequence) {
  auto draw = [](uint64_t seed) {
    Sampler s({1.0f, 1.0f, 0, seed});
    std::vector<int> out;
    for (int i = 0; i < 50; i++) {
      std::vector<float> lg = {0.0f, 0.5f, 1.0f, 0.2f, -0.3f};
      out.push_back(s.sample(lg.data(), 5));
    }
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
}

// Empirical frequencies follow softmax(logits / T).
TEST(Sampler, TemperatureSamplingMatchesSoftmax) {
  const float T = 0.7f;
  std::vector<float> base = {0.0f, 1.0f, 2.0f, -1.0f};
  Sampler s({T, 1.0f, 0, 3});
  std::map<int, int> count;
  const int N = 40000;
  for (int i = 0; i < N; i++) {
    auto lg = base;
    count[s.sample(lg.data(), 4)]++;
  }
  double z = 0;
  for (float l : base) z += std::exp(l / T);
  for (int i = 0; i < 4; i++) EXPECT_NEAR(count[i] / double(N), std::exp(base[size_t(i)] / T) / z, 0.01) << i;
}

TEST(Sampler, TopKKeepsOnlyKMostLikely) {
  Sampler s({1.0f, 1.0f, 2, 5});
  for (int i = 0; i < 2000; i++) {
    std::vector<float> lg = {0.0f, 3.0f, 2.5f, 1.0f, 0.5f};
    int t = s.sample(lg.data(), 5);
    EXPECT_TRUE(t == 1 || t == 2) << t;
  }
}

TEST(Sampler, TopPKeepsTheNucleus) {
  // probabilities ≈ 0.665, 0.245, 0.090 (+ tiny): top-p 0.8 keeps exactly the first two.
  Sampler s({1.0f, 0.8f, 0, 9});
  int seen[4] = {};
  for (int i = 0; i < 5000; i++) {
    std::vector<float> lg = {2.0f, 1.0f, 0.0f, -8.0f};
    seen[s.sample(lg.data(), 4)]++;
  }
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
  EXPECT_EQ(seen[2], 0);
  EXPECT_EQ(seen[3], 0);
}

TEST(Sampler, RejectsBadOptions) {
  EXPECT_THROW(Sampler({-1.0f, 0.9f, 0, 1}), Error);
  EXPECT_THROW(Sampler({1.0f, 0.0f, 0, 1}), Error);
  EXPECT_THROW(Sampler({1.0f, 0.9f, -2, 1}), Error);
}

}  // namespace orion
