// Element types of stored tensors and the scalar conversions between them.
// fp16 is IEEE binary16; bf16 is the top 16 bits of an fp32 (round to nearest even on the way in).
// q8_0 is llama.cpp's block-quantised int8 (ggml type Q8_0), byte for byte, so GGUF files carry it
// unchanged: each run of 32 consecutive elements of a row is one 34-byte block
//   { fp16 d; int8 q[32]; }     element i = d · q[i],   d = max|w| / 127,   q = round(w / d)
// (round half away from zero, as llama.cpp's and gguf-py's reference quantisers do). A q8_0 tensor's
// rows must hold a multiple of 32 elements.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace orion {

enum class DType : uint8_t { F32, F16, BF16, Q8_0 };

constexpr int kQ8Block = 32;           // elements per q8_0 block
constexpr size_t kQ8BlockBytes = 34;   // fp16 scale + 32 int8
struct BlockQ8_0 {
  uint16_t d;  // fp16 bits of the scale
  int8_t q[kQ8Block];
};
static_assert(sizeof(BlockQ8_0) == kQ8BlockBytes, "q8_0 blocks are packed: 2 + 32 bytes");

// Bytes of one element; for q8_0 (blocks, not elements) use dtype_bytes.
inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::Q8_0: return 0;
  }
  return 0;
}
// Bytes of n elements stored in dtype t (for q8_0, n is a multiple of 32).
inline size_t dtype_bytes(DType t, size_t n) {
  return t == DType::Q8_0 ? n / kQ8Block * kQ8BlockBytes : n * dtype_size(t);
}
// The alignment a tensor of dtype t wants in memory (its first scalar: a q8_0 block's fp16 scale).
inline size_t dtype_alignment(DType t) { return t == DType::Q8_0 ? 2 : dtype_size(t); }
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

// q8_0 blocks: n elements (a multiple of 32) quantised as llama.cpp's quantize_row_q8_0_ref does,
// and back.
void quantize_q8_0(const float* x, BlockQ8_0* out, size_t n);
void dequantize_q8_0(const BlockQ8_0* in, float* y, size_t n);

// Bulk conversion of n elements between any two dtypes (multithreaded for large n; a multiple of
// 32 when either side is q8_0).
void convert_dtype(const void* src, DType src_t, void* dst, DType dst_t, size_t n);
// Reads element i of a buffer of dtype t as fp32.
float load_as_f32(const void* data, DType t, size_t i);
// True when every element is finite; on failure *bad_index is the first bad element.
bool all_finite(const void* data, DType t, size_t n, size_t* bad_index = nullptr);

}  // namespace orion
