// Memory that starts on a 64-byte cache line.
//
// glibc serves a large allocation (from 128 KB) with mmap, 16 bytes past the start of a page, so a
// big std::vector<float> begins in the middle of a line. A kernel that walks its rows with 64-byte
// (AVX-512) loads then splits every load across two lines, and with 32-byte (AVX2) loads every
// other one, whenever the row stride is a multiple of 64 bytes — the usual case (K a multiple of
// 16). Measured on the Zen 5 VM: the prompt tiles on a widened f16 panel ran 223–237 GFLOP/s
// mid-line and 276–285 on a line (bench/RESULTS.md). Buffers such kernels stream use these.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace orion {

template <typename T>
struct LineAlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kLine{64};
  LineAlignedAllocator() = default;
  template <typename U>
  LineAlignedAllocator(const LineAlignedAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kLine)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kLine); }
  template <typename U>
  bool operator==(const LineAlignedAllocator<U>&) const { return true; }
};

// A std::vector whose data() is 64-byte aligned.
template <typename T>
using LineAlignedVector = std::vector<T, LineAlignedAllocator<T>>;

}  // namespace orion
