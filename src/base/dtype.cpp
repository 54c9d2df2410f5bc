#include "base/dtype.h"

#include <algorithm>
#include <cmath>

namespace orion {

namespace {
// One row per DType, in enum order; one column per DTypeSpelling.
constexpr const char* kSpellings[][3] = {
    {"f32", "float32", "F32"},
    {"f16", "float16", "F16"},
    {"bf16", "bfloat16", "BF16"},
    {"q8_0", "q8_0", "Q8_0"},  // torch and safetensors have no q8_0: only the Orion spelling parses
};
constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};
}  // namespace

const char* dtype_name(DType t, DTypeSpelling spelling) { return kSpellings[int(t)][int(spelling)]; }

std::optional<DType> dtype_spelled(std::string_view s, DTypeSpelling spelling) {
  for (DType t : kDTypes)
    if (s == dtype_name(t, spelling) && (t != DType::Q8_0 || spelling == DTypeSpelling::Orion)) return t;
  return std::nullopt;
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "fp32") return DType::F32;
  if (s == "fp16") return DType::F16;
  for (auto spelling : {DTypeSpelling::Orion, DTypeSpelling::Torch, DTypeSpelling::Safetensors})
    if (auto t = dtype_spelled(s, spelling)) return t;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        man <<= 1;
        ++e;
      } while (!(man & 0x400));
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 112) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00);   // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // overflows to inf after rounding
  if (a < 0x38800000u) {                                 // subnormal or zero in fp16
    float af;
    std::memcpy(&af, &a, 4);
    return uint16_t(sign | uint32_t(std::nearbyint(af * 16777216.0f)));  // units of 2^-24
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
  return uint16_t(sign | (r >> 13));
}

float load_as_f32(const void* data, DType t, size_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(data)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::Q8_0: {
      const BlockQ8_0& b = static_cast<const BlockQ8_0*>(data)[i / kQ8Block];
      return f16_to_f32(b.d) * float(b.q[i % kQ8Block]);
    }
  }
  return 0;
}

void quantize_q8_0(const float* x, BlockQ8_0* out, size_t n) {
  for (size_t b = 0; b < n / kQ8Block; b++) {
    const float* v = x + b * kQ8Block;
    float amax = 0;
    for (int i = 0; i < kQ8Block; i++) amax = std::max(amax, std::fabs(v[i]));
    // The scale as computed (fp32) divides; the block stores it rounded to fp16 — as llama.cpp does.
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int i = 0; i < kQ8Block; i++) out[b].q[i] = int8_t(std::round(v[i] * id));  // half away from zero
  }
}

void dequantize_q8_0(const BlockQ8_0* in, float* y, size_t n) {
  for (size_t b = 0; b < n / kQ8Block; b++) {
    const float d = f16_to_f32(in[b].d);
    for (int i = 0; i < kQ8Block; i++) y[b * kQ8Block + i] = d * float(in[b].q[i]);
  }
}

namespace {
// Elements [i0, i1) of src converted to dst's dtype, through fp32.
void convert_elements(const void* src, DType st, void* dst, DType dt, size_t i0, size_t i1) {
  for (size_t i = i0; i < i1; i++) {
    float v = load_as_f32(src, st, i);
    switch (dt) {
      case DType::F32: static_cast<float*>(dst)[i] = v; break;
      case DType::F16: static_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
      case DType::BF16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
      case DType::Q8_0: break;  // handled block by block in convert_dtype
    }
  }
}
}  // namespace

void convert_dtype(const void* src, DType st, void* dst, DType dt, size_t n) {
  if (st == dt) {
    std::memcpy(dst, src, dtype_bytes(st, n));
    return;
  }
  if (dt != DType::Q8_0) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (size_t i = 0; i < n; i += kQ8Block) convert_elements(src, st, dst, dt, i, std::min(n, i + kQ8Block));
    return;
  }
  // To q8_0: one block at a time through an fp32 buffer.
#pragma omp parallel for schedule(static) if (n > (1u << 16))
  for (size_t b = 0; b < n / kQ8Block; b++) {
    float v[kQ8Block];
    for (int i = 0; i < kQ8Block; i++) v[i] = load_as_f32(src, st, b * kQ8Block + i);
    quantize_q8_0(v, static_cast<BlockQ8_0*>(dst) + b, kQ8Block);
  }
}

bool all_finite(const void* data, DType t, size_t n, size_t* bad_index) {
  // Exponent bits all ones means Inf or NaN in every one of our formats.
  size_t bad = n;
  switch (t) {
    case DType::F32: {
      const uint32_t* p = static_cast<const uint32_t*>(data);
#pragma omp parallel for reduction(min : bad) if (n > (1u << 20))
      for (size_t i = 0; i < n; i++)
        if ((p[i] & 0x7f800000u) == 0x7f800000u && i < bad) bad = i;
      break;
    }
    case DType::F16: {
      const uint16_t* p = static_cast<const uint16_t*>(data);
#pragma omp parallel for reduction(min : bad) if (n > (1u << 20))
      for (size_t i = 0; i < n; i++)
        if ((p[i] & 0x7c00u) == 0x7c00u && i < bad) bad = i;
      break;
    }
    case DType::BF16: {
      const uint16_t* p = static_cast<const uint16_t*>(data);
#pragma omp parallel for reduction(min : bad) if (n > (1u << 20))
      for (size_t i = 0; i < n; i++)
        if ((p[i] & 0x7f80u) == 0x7f80u && i < bad) bad = i;
      break;
    }
    case DType::Q8_0: {  // the int8 values are always finite: check each block's fp16 scale
      const BlockQ8_0* p = static_cast<const BlockQ8_0*>(data);
      for (size_t b = 0; b < n / kQ8Block; b++)
        if ((p[b].d & 0x7c00u) == 0x7c00u) {
          bad = b * kQ8Block;
          break;
        }
      break;
    }
  }
  if (bad_index) *bad_index = bad;
  return bad == n;
}

}  // namespace orion
