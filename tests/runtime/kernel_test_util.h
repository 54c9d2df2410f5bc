// Inputs shared by the CPU kernel tests.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace orion::cpu::test {

// n floats uniform in [lo, hi), deterministic in seed.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

// The first 64-byte boundary at or after p (give the buffer 16 spare floats).
inline float* align64(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) / 64 * 64);
}

}  // namespace orion::cpu::test
