// Surface: a flat byte buffer holding packed fp16 [1, C, 1, S] data from byte 0 (C14).
#include "runtime/surface.h"

#include <algorithm>

#include "base/dtype.h"
#include "base/error.h"
#include "runtime/fp16_span.h"

namespace orion::runtime {

Surface::Surface(size_t alloc_bytes) : bytes_(alloc_bytes, 0) {}

void Surface::resize(size_t alloc_bytes) { bytes_.assign(alloc_bytes, 0); }

void Surface::clear() { std::fill(bytes_.begin(), bytes_.end(), uint8_t(0)); }

// The conversion is fp16_span's (F16C where the CPU has it, the scalar functions' bits, multithreaded
// for large buffers); what lies after
// the n·2 data bytes is left as it is — the caller decides whether the tail must be zero.
void Surface::write_f32(const float* x, size_t n) {
  ORION_CHECK(n * 2 <= bytes_.size(), "{} fp16 elements do not fit a surface of {} bytes", n, bytes_.size());
  f32_to_f16_span(reinterpret_cast<uint16_t*>(bytes_.data()), x, int64_t(n));
}

void Surface::read_f32(float* out, size_t n) const {
  ORION_CHECK(n * 2 <= bytes_.size(), "{} fp16 elements do not fit a surface of {} bytes", n, bytes_.size());
  f16_to_f32_span(out, reinterpret_cast<const uint16_t*>(bytes_.data()), int64_t(n));
}

}  // namespace orion::runtime
