// Inputs shared by the CPU kernel tests.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "runtime/cpu/kernels.h"

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

// The instruction sets this CPU can run; each test loops over them.
inline std::vector<Isa> available_isas() {
  std::vector<Isa> out;
  const Isa before = active_isa();
  for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512})
    if (set_isa(isa)) out.push_back(isa);
  set_isa(before);
  return out;
}

// Restores the start-up instruction set and thread count when a test ends.
struct RestoreIsa {
  Isa isa = active_isa();
  int threads = num_threads();
  ~RestoreIsa() { set_isa(isa), set_num_threads(threads); }
};

}  // namespace orion::cpu::test
