// On-disk quantized layouts (AWQ GEMM, GPTQ v1/v2), FP8 E4M3 and the quantization_config we write/read.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/formats/fp8.h"
#include "mo/formats/hf_quant_config.h"
#include "mo/formats/pack.h"

namespace formats = mo::formats;

namespace {

using formats::QuantizedLinear;

// Random codes, zero points in [zlo, 2^bits), f16 scales and (optionally shuffled) g_idx.
formats::QuantizedLinear random_linear(int bits, int group, bool sym, bool actorder, std::int64_t rows, std::int64_t cols, unsigned zlo,
                                       std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  formats::QuantizedLinear q;
  q.rows = rows, q.cols = cols;
  q.scheme = {bits, group, sym};
  const unsigned levels = 1u << bits;
  const int ng = q.scheme.groups(cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) q.q.push_back(static_cast<std::uint8_t>(rng() % levels));
  for (std::int64_t i = 0; i < rows * ng; ++i) {
    q.zeros.push_back(static_cast<std::uint8_t>(sym ? levels / 2 : zlo + rng() % (levels - zlo)));
    q.scales.push_back(mo::f32_to_f16(0.001f * static_cast<float>(1 + rng() % 100)));
  }
  for (std::int64_t c = 0; c < cols; ++c) q.g_idx.push_back(static_cast<std::int32_t>(c / q.scheme.effective_group(cols)));
  if (actorder) std::shuffle(q.g_idx.begin(), q.g_idx.end(), rng);
  return q;
}

void expect_same(const formats::QuantizedLinear& a, const formats::QuantizedLinear& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.zeros, b.zeros);
  EXPECT_EQ(a.scales, b.scales);
  EXPECT_EQ(a.g_idx, b.g_idx);
  EXPECT_EQ(a.dequantize(), b.dequantize());
}

TEST(QuantPack, AwqInterleavesEightOutputsPerWord) {
  // 8 outputs x 1 group of 32 inputs; output o has code o at input 0 and zero point 15 - o.
  formats::QuantizedLinear q = random_linear(4, 32, false, false, 8, 32, 0, 1);
  for (int o = 0; o < 8; ++o) {
    q.q[o * 32] = static_cast<std::uint8_t>(o);
    q.zeros[o] = static_cast<std::uint8_t>(15 - o);
  }
  const auto t = formats::pack_awq(q);
  ASSERT_EQ(t.qweight.size(), 32u);  // [in 32, out/8 1]
  // Nibble k holds output order[k], order = 0 2 4 6 1 3 5 7 (AutoAWQ's WQLinear_GEMM.from_linear).
  EXPECT_EQ(static_cast<std::uint32_t>(t.qweight[0]), 0x75316420u);
  EXPECT_EQ(static_cast<std::uint32_t>(t.qzeros[0]), 0x8ACE9BDFu);
  EXPECT_EQ(t.scales[3], q.scales[3]);  // scales [groups 1, out 8]
}

TEST(QuantPack, AwqRoundTrips) {
  for (int group : {32, 64, -1}) {
    const auto q = random_linear(4, group, false, false, 24, 128, 0, 7 + group);
    expect_same(formats::unpack_awq(formats::pack_awq(q)), q);
  }
}

TEST(QuantPack, AwqRejectsWhatItCannotStore) {
  EXPECT_THROW(formats::pack_awq(random_linear(4, 32, false, true, 8, 64, 0, 2)), mo::Error);    // act-order
  EXPECT_THROW(formats::pack_awq(random_linear(8, 32, false, false, 8, 64, 0, 2)), mo::Error);   // 8-bit
  EXPECT_THROW(formats::pack_awq(random_linear(4, 32, false, false, 12, 64, 0, 2)), mo::Error);  // out % 8
}

TEST(QuantPack, GptqPacksInputsSequentiallyAndStoresZeroMinusOneInV1) {
  formats::QuantizedLinear q = random_linear(4, 32, true, false, 8, 32, 0, 3);
  for (int i = 0; i < 8; ++i) q.q[i] = static_cast<std::uint8_t>(i);  // output 0, inputs 0..7
  const auto v1 = formats::pack_gptq(q, true);
  EXPECT_EQ(static_cast<std::uint32_t>(v1.qweight[0]), 0x76543210u);  // qweight [in/8, out]: row 0, column 0
  EXPECT_EQ(static_cast<std::uint32_t>(v1.qzeros[0]), 0x77777777u);   // symmetric zero 8 stored as 7
  const auto v2 = formats::pack_gptq(q, false);
  EXPECT_EQ(static_cast<std::uint32_t>(v2.qzeros[0]), 0x88888888u);
  EXPECT_EQ(v2.qweight, v1.qweight);

  formats::QuantizedLinear q8 = random_linear(8, 32, true, false, 4, 32, 0, 4);
  for (int i = 0; i < 4; ++i) q8.q[i] = static_cast<std::uint8_t>(0x10 * (i + 1));
  const auto t8 = formats::pack_gptq(q8, true);
  EXPECT_EQ(static_cast<std::uint32_t>(t8.qweight[0]), 0x40302010u);
  EXPECT_EQ(static_cast<std::uint32_t>(t8.qzeros[0]), 0x7F7F7F7Fu);  // 128 - 1
}

TEST(QuantPack, GptqRoundTripsEveryVariant) {
  for (int bits : {4, 8})
    for (bool v1 : {true, false})
      for (bool sym : {true, false})
        for (bool actorder : {false, true}) {
          SCOPED_TRACE(::testing::Message() << bits << "-bit v1=" << v1 << " sym=" << sym << " actorder=" << actorder);
          const auto q = random_linear(bits, 32, sym, actorder, 16, 96, v1 ? 1 : 0, 11 * bits + v1 + 2 * sym + 4 * actorder);
          expect_same(formats::unpack_gptq(formats::pack_gptq(q, v1), 32, sym, v1), q);
        }
  const auto per_row = random_linear(4, -1, false, false, 8, 40, 1, 5);  // 40 inputs: one group per row
  expect_same(formats::unpack_gptq(formats::pack_gptq(per_row, true), -1, false, true), per_row);
}

TEST(QuantPack, GptqV1CannotStoreZeroPointZero) {
  auto q = random_linear(4, 32, false, false, 8, 32, 0, 6);
  q.zeros[0] = 0;
  try {
    formats::pack_gptq(q, true);
    FAIL() << "expected an error";
  } catch (const mo::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gptq_v2"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(formats::pack_gptq(q, false));
}

TEST(QuantPack, GptqV1ReadsStoredFieldPlusOne) {
  // A v1 field of 0xF means zero point 16 to vLLM's kernels (they add 1 per field); 8-bit 0xFF would be 256.
  auto q = random_linear(4, 32, false, false, 8, 32, 1, 8);
  auto t = formats::pack_gptq(q, true);
  t.qzeros[0] = static_cast<std::int32_t>(0xFFFFFFFFu);
  EXPECT_EQ(formats::unpack_gptq(t, 32, false, true).zeros[0], 16);
  auto t8 = formats::pack_gptq(random_linear(8, 32, false, false, 4, 32, 1, 9), true);
  t8.qzeros[0] = static_cast<std::int32_t>(0xFFFFFFFFu);
  EXPECT_THROW(formats::unpack_gptq(t8, 32, false, true), mo::Error);
}

float bits_f(std::uint32_t b) { return std::bit_cast<float>(b); }

TEST(Fp8, EncodesKnownValues) {
  using formats::f32_to_e4m3;
  EXPECT_EQ(formats::f32_to_e4m3(448.0f), 0x7E);
  EXPECT_EQ(formats::f32_to_e4m3(-448.0f), 0xFE);
  EXPECT_EQ(formats::f32_to_e4m3(1.0f), 0x38);
  EXPECT_EQ(formats::f32_to_e4m3(-2.0f), 0xC0);
  EXPECT_EQ(formats::f32_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(formats::f32_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(formats::f32_to_e4m3(std::ldexp(1.0f, -6)), 0x08);  // smallest normal
  EXPECT_EQ(formats::f32_to_e4m3(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(formats::f32_to_e4m3(std::ldexp(7.0f, -9)), 0x07);  // largest subnormal
  EXPECT_EQ(formats::f32_to_e4m3(std::ldexp(-3.0f, -9)), 0x83);
  EXPECT_EQ(formats::f32_to_e4m3(std::ldexp(1.0f, -11)), 0x00);  // underflow
  EXPECT_EQ(formats::f32_to_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
}

TEST(Fp8, SaturatesAndKeepsNan) {
  using formats::f32_to_e4m3;
  EXPECT_EQ(formats::f32_to_e4m3(464.0f), 0x7E);  // halfway to 480 (which would be the NaN code)
  EXPECT_EQ(formats::f32_to_e4m3(1e9f), 0x7E);
  EXPECT_EQ(formats::f32_to_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(formats::f32_to_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(formats::f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7F, 0x7F);
  EXPECT_TRUE(std::isnan(formats::e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(formats::e4m3_to_f32(0xFF)));
}

TEST(Fp8, RoundsHalfToEven) {
  using formats::f32_to_e4m3;
  EXPECT_EQ(formats::f32_to_e4m3(1.0625f), 0x38);                 // between 1.0 (even) and 1.125
  EXPECT_EQ(formats::f32_to_e4m3(1.1875f), 0x3A);                 // between 1.125 and 1.25 (even)
  EXPECT_EQ(formats::f32_to_e4m3(bits_f(0x3F880001u)), 0x39);     // just above the 1.0625 tie
  EXPECT_EQ(formats::f32_to_e4m3(std::ldexp(1.0f, -10)), 0x00);   // half the smallest subnormal: to even 0
  EXPECT_EQ(formats::f32_to_e4m3(std::ldexp(3.0f, -10)), 0x02);   // 1.5 subnormal steps: to even 2
  EXPECT_EQ(formats::f32_to_e4m3(std::ldexp(15.0f, -10)), 0x08);  // 7.5 steps: to even 8, the smallest normal
  EXPECT_EQ(formats::f32_to_e4m3(240.0f), 0x77);
  EXPECT_EQ(formats::f32_to_e4m3(248.0f), 0x78);  // between 240 and 256 (even): the carry moves into the exponent
}

TEST(Fp8, DecodeEncodeRoundTripsEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const float v = formats::e4m3_to_f32(static_cast<std::uint8_t>(c));
    if (std::isnan(v)) continue;
    EXPECT_EQ(formats::f32_to_e4m3(v), c) << "code " << c << " value " << v;
  }
  EXPECT_EQ(formats::e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(formats::e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(Fp8, QuantizesPerChannelAndPerTensor) {
  const std::vector<float> w = {0.5f,  -1.0f, 0.25f, 0.0f,   // row absmax 1
                                10.0f, 2.5f,  -5.0f, 1.0f};  // row absmax 10
  const auto pc = formats::quantize_fp8(w.data(), 2, 4, true);
  ASSERT_EQ(pc.scales.size(), 2u);
  EXPECT_EQ(pc.scales[0], 1.0f / 448.0f);
  EXPECT_EQ(pc.scales[1], 10.0f / 448.0f);
  EXPECT_EQ(pc.q[1], 0xFE);  // -absmax -> -448
  EXPECT_EQ(pc.q[4], 0x7E);
  const auto d = pc.dequantize();
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(d[i], w[i], std::fabs(w[i]) / 16 + 1e-6f) << i;
  const auto pt = formats::quantize_fp8(w.data(), 2, 4, false);
  ASSERT_EQ(pt.scales.size(), 1u);
  EXPECT_EQ(pt.scales[0], 10.0f / 448.0f);
  EXPECT_EQ(pt.q[4], 0x7E);
}

}  // namespace
