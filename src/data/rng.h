// A small integer random number generator whose output is the same on every machine, compiler and
// standard library (std::uniform_int_distribution and friends are not: each library maps the engine's
// bits to a range its own way). Used wherever data must be reproducible from a seed: the built-in
// corpus, shuffling, the train/validation split.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace orion::data {

// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit counter advanced by the golden-ratio constant and
// scrambled by two multiply-xorshift rounds. Passes BigCrush; one state word; any seed is fine.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(splitmix64(seed)) {}
  // Two values mixed into one seed (e.g. corpus seed and story index).
  Rng(uint64_t a, uint64_t b) : state_(splitmix64(splitmix64(a) ^ (b * 0xD1B54A32D192ED03ull))) {}

  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by Lemire's multiply-shift (n > 0). The bias is below n / 2^64: invisible here.
  uint64_t below(uint64_t n) { return uint64_t((unsigned __int128)next() * n >> 64); }
  bool chance(int percent) { return below(100) < uint64_t(percent); }
  uint64_t state() const { return state_; }

  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

  // Fisher–Yates shuffle driven by below(): the same permutation everywhere for the same seed.
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  uint64_t state_;
};

}  // namespace orion::data
