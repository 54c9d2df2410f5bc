#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/dtype.h"

namespace orion {

TEST(DType, F16RoundTripsEveryHalf) {
  // Every finite fp16 value converts to fp32 and back unchanged.
  for (uint32_t h = 0; h < 65536; h++) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN payloads
    EXPECT_EQ(f32_to_f16(f16_to_f32(uint16_t(h))), h) << h;
  }
}

TEST(DType, F16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);     // halfway → even
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);     // halfway → even (up)
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);               // rounds to inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, Bf16) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.5f)), 1.5f);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // halfway → even
  EXPECT_NEAR(bf16_to_f32(f32_to_bf16(3.14159f)), 3.14159f, 0.01f);
}

TEST(DType, AllFiniteFindsFirstBad) {
  float v[5] = {1, 2, std::numeric_limits<float>::infinity(), 4, NAN};
  size_t bad;
  EXPECT_FALSE(all_finite(v, DType::F32, 5, &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_TRUE(all_finite(v, DType::F32, 2));
  uint16_t h[3] = {0x3c00, 0x7e00, 0};
  EXPECT_FALSE(all_finite(h, DType::F16, 3, &bad));
  EXPECT_EQ(bad, 1u);
}

}  // namespace orion

TEST(DType, EachFormatsSpellingReadsBackAsTheSameDType) {
  using S = orion::DTypeSpelling;
  EXPECT_STREQ(orion::dtype_name(orion::DType::BF16), "bf16");
  EXPECT_STREQ(orion::dtype_name(orion::DType::BF16, S::Torch), "bfloat16");
  EXPECT_STREQ(orion::dtype_name(orion::DType::F16, S::Safetensors), "F16");
  for (auto t : {orion::DType::F32, orion::DType::F16, orion::DType::BF16})
    for (auto s : {S::Orion, S::Torch, S::Safetensors}) {
      EXPECT_EQ(orion::dtype_spelled(orion::dtype_name(t, s), s), t);
      EXPECT_EQ(orion::parse_dtype(orion::dtype_name(t, s)), t);
    }
  // A spelling belongs to its format only: a safetensors header saying "bf16" is not understood.
  EXPECT_FALSE(orion::dtype_spelled("bf16", S::Safetensors).has_value());
  EXPECT_FALSE(orion::dtype_spelled("F32", S::Torch).has_value());
  EXPECT_EQ(orion::parse_dtype("fp16"), orion::DType::F16);
  EXPECT_FALSE(orion::parse_dtype("int8").has_value());
}
