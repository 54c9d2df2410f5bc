#include "base/dtype.h"

#include <cmath>

namespace orion {

namespace {
// One row per DType, in enum order; one column per DTypeSpelling.
constexpr const char* kSpellings[][3] = {
    {"f32", "float32", "F32"},
    {"f16", "float16", "F16"},
    {"bf16", "bfloat16", "BF16"},
};
constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};
}  // namespace

const char* dtype_name(DType t, DTypeSpelling spelling) { return kSpellings[int(t)][int(spelling)]; }

std::optional<DType> dtype_spelled(std::string_view s, DTypeSpelling spelling) {
  for (DType t : kDTypes)
    if (s == dtype_name(t, spelling)) return t;
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
  }
  return 0;
}

void convert_dtype(const void* src, DType st, void* dst, DType dt, size_t n) {
  if (st == dt) {
    std::memcpy(dst, src, n * dtype_size(st));
    return;
  }
#pragma omp parallel for schedule(static) if (n > (1u << 16))
  for (size_t i = 0; i < n; i++) {
    float v = load_as_f32(src, st, i);
    switch (dt) {
      case DType::F32: static_cast<float*>(dst)[i] = v; break;
      case DType::F16: static_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
      case DType::BF16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
    }
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
  }
  if (bad_index) *bad_index = bad;
  return bad == n;
}

}  // namespace orion
