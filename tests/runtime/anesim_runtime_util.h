// Helpers of the runtime tests: the anesim driver, small graphs, and comparison with the reference
// interpreter within fp16 tolerance.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "ir/interpret.h"
#include "runtime/driver.h"

namespace orion::test {

inline std::unique_ptr<runtime::Driver> anesim_driver(runtime::DriverOptions options = {}) {
  return runtime::make_driver("anesim", options);
}

inline ir::Tensor32 uniform_tensor(std::vector<int64_t> shape, uint32_t seed, float lo = -1, float hi = 1) {
  ir::Tensor32 t(std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (float& v : t.data) v = u(rng);
  return t;
}

// max |a − b| / max(1, max |b|): the measure weight updates verify with.
inline double relative_error(const ir::Tensor32& a, const ir::Tensor32& b) {
  EXPECT_EQ(a.shape, b.shape);
  if (a.data.size() != b.data.size()) return INFINITY;
  double err = 0, scale = 1;
  for (size_t i = 0; i < a.data.size(); i++) {
    err = std::max(err, std::fabs(double(a.data[i]) - double(b.data[i])));
    scale = std::max(scale, std::fabs(double(b.data[i])));
  }
  return err / scale;
}

// Every output of `got` against the fp32 interpreter on the same inputs.
inline void expect_matches_interpreter(const ir::Graph& g, const std::map<std::string, ir::Tensor32>& inputs,
                                       const std::map<std::string, ir::Tensor32>& got, double tol = 1e-2) {
  auto want = ir::interpret_named(g, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_LE(relative_error(got.at(name), w), tol) << "output " << name;
  }
}

}  // namespace orion::test
