#include <gtest/gtest.h>

#include <cmath>

#include "mo/core/half.h"

namespace {

TEST(Half, EveryF16RoundTripsThroughF32) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    float f = mo::f16_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(mo::f16_to_f32(mo::f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(mo::f32_to_f16(f), h) << h;
  }
}

TEST(Half, EveryBf16RoundTripsThroughF32) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    float f = mo::bf16_to_f32(static_cast<std::uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(mo::f32_to_bf16(f), b) << b;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(mo::f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(mo::f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);  // halfway, even stays
  EXPECT_EQ(mo::f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);  // halfway, odd rounds up
  EXPECT_EQ(mo::f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(mo::f32_to_f16(65520.0f), 0x7c00);        // rounds to inf
  EXPECT_EQ(mo::f32_to_f16(5.9604645e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(mo::f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(mo::f32_to_bf16(1.00390625f), 0x3f80);  // halfway to 0x3f81, even stays
  EXPECT_EQ(mo::f32_to_bf16(3.0e38f), 0x7f62);
}

}  // namespace
