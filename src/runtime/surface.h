// A Surface is a flat byte buffer as the ANE sees it (an IOSurface of width = bytes, height 1, one
// byte per element on macOS): fp16 data of a [1, C, 1, S] tensor, channel-major, packed from
// byte 0 (C14), inside an allocation that may be larger than the data (C5/C13 uniform sizes).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace orion::runtime {

class Surface {
 public:
  explicit Surface(size_t alloc_bytes = 0);
  size_t alloc_bytes() const { return bytes_.size(); }
  uint8_t* data() { return bytes_.data(); }
  const uint8_t* data() const { return bytes_.data(); }
  void resize(size_t alloc_bytes);  // keeps nothing; zero-filled
  void clear();                     // zero every byte

  // fp32 [C, S] row-major (channel-major, as the ANE layout [1, C, 1, S]) ⇄ packed fp16 at byte 0.
  // n = C·S elements; n·2 must fit the allocation (ORION_CHECK).
  void write_f32(const float* x, size_t n);
  void read_f32(float* out, size_t n) const;
  // Raw fp16 elements (for drivers).
  const uint16_t* f16() const { return reinterpret_cast<const uint16_t*>(bytes_.data()); }
  uint16_t* f16() { return reinterpret_cast<uint16_t*>(bytes_.data()); }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace orion::runtime
