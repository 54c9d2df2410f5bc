// fp16 conversions over whole buffers (anesim's storage rounding, surfaces): the same bits as
// base/dtype.h's scalar f32_to_f16 / f16_to_f32, at the speed of the CPU's conversion instructions.
//
// x86's F16C instructions (vcvtps2ph with round-to-nearest-even, vcvtph2ps) convert like the scalar
// functions for every finite value, infinity, overflow and subnormal; they differ only in the bits
// of a NaN (they keep its payload, the scalar code makes every NaN the canonical one). So a block
// of lanes holding a NaN is redone with the scalar functions, and the result is identical to them
// everywhere. The instruction set follows cpu::active_isa(): AVX-512 (16 lanes), AVX2 + F16C (8),
// or the scalar functions on the portable path.
#pragma once
#include <cstdint>

namespace orion::runtime {

// p[i] = the nearest fp16 value of p[i] (ties to even, overflow to ±inf), for i < n.
void round_fp16_span(float* p, int64_t n);
// dst[i] = fp32 of the fp16 bits src[i].
void f16_to_f32_span(float* dst, const uint16_t* src, int64_t n);
// dst[i] = fp16 bits of src[i] (round to nearest even).
void f32_to_f16_span(uint16_t* dst, const float* src, int64_t n);

}  // namespace orion::runtime
