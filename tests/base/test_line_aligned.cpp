// LineAlignedVector: its data starts on a 64-byte line at every size — small ones (from the heap's
// bins) and large ones (glibc's mmap, which alone would start 16 bytes into a page) — and after it
// grows.
#include <gtest/gtest.h>

#include <cstdint>

#include "base/line_aligned.h"

namespace orion {
namespace {

bool on_a_line(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(LineAligned, DataStartsOnA64ByteLineAtEverySize) {
  for (size_t n : {size_t(1), size_t(3), size_t(17), size_t(1000), size_t(40000), size_t(1) << 20, (size_t(1) << 22) + 5}) {
    LineAlignedVector<float> f(n, 1.0f);
    LineAlignedVector<uint16_t> h(n);
    EXPECT_TRUE(on_a_line(f.data())) << n;
    EXPECT_TRUE(on_a_line(h.data())) << n;
    EXPECT_EQ(f[n - 1], 1.0f);
    f.resize(3 * n + 1, 2.0f);  // grown: a new block, on a line again, the old values kept
    EXPECT_TRUE(on_a_line(f.data())) << n;
    EXPECT_EQ(f[n - 1], 1.0f);
    EXPECT_EQ(f[3 * n], 2.0f);
  }
  // What it guards against: a plain vector this large is not on a line (the reason for the type).
  std::vector<float> plain(size_t(1) << 20);
  RecordProperty("plain_vector_offset_in_line", int(reinterpret_cast<uintptr_t>(plain.data()) % 64));
}

}  // namespace
}  // namespace orion
