#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "mo/core/half.h"
#include "mo/quant/rtn.h"

namespace formats = mo::formats;

using namespace mo;
using namespace mo::quant;

namespace {

formats::QuantScheme scheme(int bits, int group, bool sym) {
  formats::QuantScheme s;
  s.bits = bits;
  s.group_size = group;
  s.sym = sym;
  return s;
}

std::vector<int> codes(const formats::QuantizedLinear& q) { return {q.q.begin(), q.q.end()}; }

}  // namespace

TEST(QuantRtn, Asym4BitGroupTakesRangeThroughZero) {
  // range [-1, 2]: scale = 3/15 = 0.2 -> f16 0.199951..., zero = round(1 / 0.19995) = 5
  const std::vector<float> w = {-1.0f, 0.5f, 2.0f, 0.25f};
  const formats::QuantizedLinear q = quantize_rtn(w.data(), 1, 4, scheme(4, 4, false));
  EXPECT_EQ(q.scales[0], f32_to_f16(0.2f));
  EXPECT_FLOAT_EQ(f16_to_f32(q.scales[0]), 0.199951171875f);
  EXPECT_EQ(q.zeros[0], 5);
  EXPECT_EQ(codes(q), (std::vector<int>{0, 8, 15, 6}));
}

TEST(QuantRtn, Asym8BitAllPositiveGroupKeepsZeroAtCodeZero) {
  // min(w, 0) = 0: scale = 2.55/255 = 0.01 -> f16 0.0099945, zero 0
  const std::vector<float> w = {0.5f, 1.0f, 2.55f, 0.3f};
  const formats::QuantizedLinear q = quantize_rtn(w.data(), 1, 4, scheme(8, -1, false));
  EXPECT_EQ(q.scales[0], f32_to_f16(0.01f));
  EXPECT_EQ(q.zeros[0], 0);
  EXPECT_EQ(codes(q), (std::vector<int>{50, 100, 255, 30}));
}

TEST(QuantRtn, SymUsesAbsmaxAndRoundsHalfToEven) {
  // 4-bit: absmax 7.5 -> scale 2*7.5/15 = 1 exactly, zero 8; -7.5 -> -8 and 1.5 -> 2 (half to even)
  const std::vector<float> w4 = {-7.5f, 3.2f, 0.0f, 1.5f};
  const formats::QuantizedLinear q4 = quantize_rtn(w4.data(), 1, 4, scheme(4, 4, true));
  EXPECT_FLOAT_EQ(f16_to_f32(q4.scales[0]), 1.0f);
  EXPECT_EQ(q4.zeros[0], 8);
  EXPECT_EQ(codes(q4), (std::vector<int>{0, 11, 8, 10}));

  // 8-bit: absmax 127.5 -> scale 1, zero 128; +127.5 -> 128 + 128 clamps to 255
  const std::vector<float> w8 = {127.5f, -127.5f, 0.49f, -3.5f};
  const formats::QuantizedLinear q8 = quantize_rtn(w8.data(), 1, 4, scheme(8, 4, true));
  EXPECT_FLOAT_EQ(f16_to_f32(q8.scales[0]), 1.0f);
  EXPECT_EQ(q8.zeros[0], 128);
  EXPECT_EQ(codes(q8), (std::vector<int>{255, 0, 128, 124}));
}

TEST(QuantRtn, AllZeroGroupDequantizesToZero) {
  const std::vector<float> w(8, 0.0f);
  for (bool sym : {false, true}) {
    const formats::QuantizedLinear q = quantize_rtn(w.data(), 1, 8, scheme(4, 8, sym));
    EXPECT_EQ(q.scales[0], f32_to_f16(2.0f / 15.0f)) << "range [-1, 1]";
    for (float v : q.dequantize()) EXPECT_EQ(v, 0.0f);
  }
}

TEST(QuantRtn, PerChannelGroupCoversWholeRow) {
  const std::vector<float> w = {1.0f, -2.0f, 3.0f, 0.5f, -1.5f,  // row 0: range [-2, 3]
                                0.1f, 0.2f,  0.3f, 0.4f, 0.5f};  // row 1: range [0, 0.5]
  const formats::QuantizedLinear q = quantize_rtn(w.data(), 2, 5, scheme(4, -1, false));
  EXPECT_EQ(q.n_groups(), 1);
  EXPECT_EQ(q.g_idx, (std::vector<std::int32_t>(5, 0)));
  EXPECT_EQ(q.scales[0], f32_to_f16(5.0f / 15.0f));
  EXPECT_EQ(q.zeros[0], 6);  // round(2 / 0.33325)
  EXPECT_EQ(q.scales[1], f32_to_f16(0.5f / 15.0f));
  EXPECT_EQ(q.zeros[1], 0);
  EXPECT_TRUE(q.contiguous_groups());
}

TEST(QuantRtn, LastPartialGroupUsesOnlyItsColumns) {
  // 10 columns, group 4: groups [0,4), [4,8), [8,10). The big values in group 1 must not leak into group 2.
  const std::vector<float> w = {0.1f, 0.2f, 0.3f, 0.4f, 100.0f, -100.0f, 5.0f, 6.0f, -0.75f, 0.75f};
  const formats::QuantizedLinear q = quantize_rtn(w.data(), 1, 10, scheme(4, 4, false));
  ASSERT_EQ(q.n_groups(), 3);
  EXPECT_EQ(q.g_idx, (std::vector<std::int32_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2}));
  EXPECT_EQ(q.scales[2], f32_to_f16(1.5f / 15.0f));  // range [-0.75, 0.75]
  EXPECT_EQ(q.zeros[2], 8);                          // round(0.75 / 0.0999756) = round(7.5018)
  EXPECT_EQ(q.q[8], 0);
  EXPECT_EQ(q.q[9], 15);
}

TEST(QuantRtn, DequantizedErrorWithinHalfScale) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const std::int64_t rows = 16, cols = 200;  // 200 = 3 full groups of 64 + a partial one
  std::vector<float> w(rows * cols);
  for (float& v : w) v = nd(rng);
  for (int bits : {4, 8}) {
    for (bool sym : {false, true}) {
      const formats::QuantizedLinear q = quantize_rtn(w.data(), rows, cols, scheme(bits, 64, sym));
      const std::vector<float> dq = q.dequantize();
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          const float s = f16_to_f32(q.scales[r * q.n_groups() + q.g_idx[c]]);
          // Half a step, plus the f16 rounding of the scale accumulated over up to 2^bits steps at the
          // clamped end of the range.
          const float bound = 0.5f * s + static_cast<float>(1 << bits) * s * 0x1p-11f;
          EXPECT_LE(std::fabs(w[r * cols + c] - dq[r * cols + c]), bound) << bits << " bits, sym " << sym;
        }
      }
    }
  }
}
