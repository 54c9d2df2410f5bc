// Element types of stored tensors and the scalar conversions between them.
// fp16 is IEEE binary16; bf16 is the top 16 bits of an fp32 (round to nearest even on the way in).
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace orion {

enum class DType : uint8_t { F32, F16, BF16 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
  }
  return 0;
}
// How each file format spells a dtype: Orion's flags and messages ("bf16"), a Hugging Face
// config.json's torch_dtype ("bfloat16"), a safetensors header ("BF16").
enum class DTypeSpelling { Orion, Torch, Safetensors };
const char* dtype_name(DType t, DTypeSpelling spelling = DTypeSpelling::Orion);
// The dtype spelled s in exactly that spelling; nullopt for anything else.
std::optional<DType> dtype_spelled(std::string_view s, DTypeSpelling spelling);
// Any spelling above, and fp32/fp16 (what a user may type): f32/fp32/float32/F32, ...
std::optional<DType> parse_dtype(std::string_view s);

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // keep NaN a NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                         // round to nearest even
  return uint16_t(u >> 16);
}
constexpr float kFp16Max = 65504.0f;  // the largest finite fp16 value
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even, overflow to ±inf

// Bulk conversion of n elements between any two dtypes (multithreaded for large n).
void convert_dtype(const void* src, DType src_t, void* dst, DType dst_t, size_t n);
// Reads element i of a buffer of dtype t as fp32.
float load_as_f32(const void* data, DType t, size_t i);
// True when every element is finite; on failure *bad_index is the first bad element.
bool all_finite(const void* data, DType t, size_t n, size_t* bad_index = nullptr);

}  // namespace orion
