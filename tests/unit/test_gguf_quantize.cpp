#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_dequant.h"
#include "mo/quant/gguf_quantize.h"

namespace {

using mo::GgmlType;
using mo::quant::gguf_can_quantize;
using mo::quant::gguf_quantize_row;

constexpr std::uint32_t id(GgmlType t) { return static_cast<uint32_t>(t); }

const GgmlType kBlockTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

std::string name(GgmlType t) { return mo::ggml_type_info(t)->name; }

std::vector<std::uint8_t> quantize(GgmlType t, const std::vector<float>& x, std::int64_t n_per_row, const float* importance = nullptr) {
  const std::uint64_t row_bytes = mo::ggml_row_bytes(id(t), static_cast<std::uint64_t>(n_per_row));
  const std::int64_t rows = static_cast<std::int64_t>(x.size()) / n_per_row;
  std::vector<std::uint8_t> out(row_bytes * static_cast<std::uint64_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    gguf_quantize_row(id(t), x.data() + r * n_per_row, out.data() + r * row_bytes, n_per_row, importance);
  }
  return out;
}

std::vector<float> dequantize(GgmlType t, const std::vector<std::uint8_t>& q, std::size_t n) {
  std::vector<float> y(n);
  mo::gguf::dequantize_row(id(t), q.data(), y.data(), static_cast<std::int64_t>(n));
  return y;
}

std::uint64_t fnv1a(const void* data, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<const std::uint8_t*>(data)[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// Inputs built from integers with exact float operations only (no libm, no fused multiply-add
// possible), so the same bits come out on every machine and in the generator of the table below.
class SplitMix {
 public:
  explicit SplitMix(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f; }  // [0, 1)
  // Sum of four uniforms: bell-shaped on (-2, 2). Sequenced, since argument order is unspecified.
  float bell() {
    const float a = uniform(), b = uniform(), c = uniform(), d = uniform();
    return ((a + b) + (c + d)) - 2.0f;
  }

 private:
  std::uint64_t s_;
};

constexpr std::int64_t kGoldenRow = 512;
constexpr int kGoldenRows = 2;
constexpr int kGoldenCases = 8;

std::vector<float> golden_input(int c) {
  SplitMix g(static_cast<std::uint64_t>(c) + 1);
  std::vector<float> x(kGoldenRows * kGoldenRow);
  float block_scale = 1;
  for (std::size_t i = 0; i < x.size(); ++i) {
    float v = 0;
    switch (c) {
      case 0: v = g.bell() * 0.05f; break;  // weight-like
      case 1:                               // 1 in 64 an outlier
        v = g.bell() * 0.02f;
        if (g.next() % 64 == 0) v = v * 40.0f;
        break;
      case 2:  // each 32-block at its own power-of-two scale, 2^-8 .. 2^8
        if (i % 32 == 0) block_scale = std::ldexp(1.0f, static_cast<int>(g.next() % 17) - 8);
        v = g.bell() * block_scale;
        break;
      case 3: v = g.next() % 4 == 0 ? g.bell() : 0.0f; break;  // 3/4 zeros
      case 4: v = g.uniform() + 0.25f; break;                  // one-signed, min far from 0
      case 5: v = 0.37f; break;                                // all equal
      case 6: v = 0.0f; break;
      default: v = g.bell() * 1e-6f; break;  // below f16's normal range once divided into scales
    }
    x[i] = v;
  }
  return x;
}

std::vector<float> golden_importance() {
  SplitMix g(99);
  std::vector<float> w(kGoldenRow);
  for (float& v : w) {
    const float a = g.uniform(), b = g.uniform();
    v = (a + 0.01f) * (b + 0.01f);
  }
  return w;
}

struct Golden {
  GgmlType type;
  std::uint64_t plain[kGoldenCases];       // no importance
  std::uint64_t importance[kGoldenCases];  // golden_importance() for every row
};

// FNV-1a of the bytes llama.cpp writes for golden_input(c): ggml's own quantize_<type>(src, dst, 2, 512,
// imatrix) from libggml-base of PyPI's libggml-python 0.20.2.post1 (ggml g50cbc3294, built without
// FMA), called through ctypes on the same inputs. tests/python/test_gguf_quantize_reference.py
// compares against that library directly, on many more inputs, when it is installed.
const Golden kGoldens[] = {
    {GgmlType::Q4_0,
     {0x06df8a886d188541, 0x602a6d007c447b78, 0x55f22afbc038a16d, 0x371ce5eeedb85ba9, 0x4cd3c9e9e73c9c86, 0xf25637eec31ee425,
      0xfac7bf22d68b3025, 0x8c4e7d17ccc7e492},
     {0x26152647b141aa39, 0x017b32cfdc922e97, 0x36e7e964f39ae940, 0x651aa583bbf2b277, 0xae1205107e14e23e, 0x88d74d9884fe90e5,
      0xb9d0059d61083025, 0xc0206cff2b6bdac3}},
    {GgmlType::Q4_1,
     {0xf377546da7c83e07, 0x323014c37ea5ab8b, 0xca239ec9361cee07, 0x572c3594e72eda25, 0x34ff4e9cde9dc9b1, 0x2b5a4d0f811939a5,
      0x96554ce2cfb01525, 0x7a37a5acf28a4f9a},
     {0x77bb945f5ae38aeb, 0xda11a196be00ff8e, 0xf11892d17e93e5da, 0x351e6721f435f0f7, 0xdf3b29c82fa6f95b, 0x61f0f24073357465,
      0x96554ce2cfb01525, 0x621009987c9ca823}},
    {GgmlType::Q5_0,
     {0x717ae1951e9ef581, 0xe2b7ba50bbca93a3, 0x63468516019987aa, 0x7a7ca05330451b69, 0xb195a451a7ee54ee, 0x268026681480a525,
      0x5a951291e801fda5, 0x3e8853760db35b55},
     {0x0546b655cbfad98a, 0x46ef9b6ff6ca0068, 0xc5f3b14802daa609, 0x4a0e1ff28d8301e6, 0x0880c7ad2c720528, 0x4688e7c4f2cd7ba5,
      0xcf58746c2dfcfa25, 0xc1c297b648fd569a}},
    {GgmlType::Q5_1,
     {0x2f3443e316bbac7e, 0xb11307248ee84546, 0x1fbd91d6561649e7, 0xf597122a30d0d9a2, 0x3399c619efe966ac, 0xa9babcf17c68dea5,
      0x9fa9e040e0eedf25, 0x0d23df8494adf77c},
     {0x4ad0ce224b719dda, 0xeb98685e1d7bc087, 0xb9f8fc1e50ae6a98, 0x27fe230aa1c942aa, 0xd04dfa41ebd540db, 0x023f32036269e425,
      0x9fa9e040e0eedf25, 0x1d89e6a1515f4e4f}},
    {GgmlType::Q8_0,
     {0x167bc8699ae54ddd, 0x9a275eaf4eecde6f, 0x87eace5f1c53c77f, 0xf17d348c24b96474, 0x1a98d291e98c2e29, 0x51f82a75f2fb7d25,
      0xc4a024f324535825, 0x6597586dbff20fe7},
     {0x167bc8699ae54ddd, 0x9a275eaf4eecde6f, 0x87eace5f1c53c77f, 0xf17d348c24b96474, 0x1a98d291e98c2e29, 0x51f82a75f2fb7d25,
      0xc4a024f324535825, 0x6597586dbff20fe7}},
    {GgmlType::Q2_K,
     {0x25720c26762a4aea, 0x334f6f0123ec094a, 0x428d1ac69ab06e54, 0x9f4824addf762cd0, 0xa03b3dd51e170eee, 0x9a7b6d1da9c50765,
      0x51795983e22e1d65, 0x4d190ad3c603a4aa},
     {0xa8a3ed62d5684544, 0x98313b5bd83072a1, 0x70154ae294c48a6c, 0x2482d7ec53458a8a, 0x3b6ce2b62e395957, 0x9a7b6d1da9c50765,
      0x51795983e22e1d65, 0xfbc1be8e4211b1bc}},
    {GgmlType::Q3_K,
     {0x90801f22205cad67, 0x527db56d813e2533, 0x0599ad85f97ad674, 0xf762522279e12257, 0xefeab91254c58658, 0xd01e7c1ca75a00a5,
      0x08fd0a89c6878385, 0x9d47ad24695f37ab},
     {0x3e960756c79f8b6b, 0x30062eaba8f6ae8b, 0x0ca1104c985c37d7, 0x9d4b644533eacedd, 0x3ccca52d7929a857, 0xba78d9367d3b2a25,
      0x08fd0a89c6878385, 0xe60a66fb2551668b}},
    {GgmlType::Q4_K,
     {0x626e45816d7f781a, 0x98019aa8c5d1974d, 0xd9e762c5edaeac1e, 0x00d59f0c2e8daf80, 0x7c5899488701a057, 0x20ab2f94c7f1cc45,
      0xb9d0059d61083025, 0xa644f457877c5a30},
     {0xf122ba5b13b9f385, 0x86592b216d1d52f4, 0xc1e539ff6831cd40, 0x30faf8025ba31e6c, 0xc039ee8d6bc07dd3, 0x20ab2f94c7f1cc45,
      0xb9d0059d61083025, 0x18ffe0365755b041}},
    {GgmlType::Q5_K,
     {0x13815e75e2b0320f, 0xca6b7d617ba56f65, 0x4f0fb5f9912616a0, 0x6cebf40b7e158389, 0xe93c95157c2233e1, 0xe3e4c5b5f843858d,
      0xcf58746c2dfcfa25, 0xece678c51cad29f1},
     {0x1537184aab85c15b, 0xae499b62a0d69c35, 0x5a08f5b267fcb4f5, 0x7f1d352a8aa9bbeb, 0x5b37b3d14f310113, 0xe3e4c5b5f843858d,
      0xcf58746c2dfcfa25, 0xb4a522ba72a95381}},
    {GgmlType::Q6_K,
     {0x1aa0e7bed14822a0, 0xb06bebc29a9aa9a1, 0x930ef116f507e5b6, 0x567c1a983bd554c4, 0x58b6b7c004165a5d, 0xe1b4a1e15c73cfe5,
      0xdb696f78397bfac5, 0xcc7470add5bbc37e},
     {0x46f04d60ff584ed1, 0x1345442de1629f3d, 0x5d3a8e69309396cb, 0x54a4eba8fc4efb04, 0x3b6cd4e4af957341, 0x57fbd5a982731725,
      0xdb696f78397bfac5, 0xcf738ac0e5d5b9c4}},
};

TEST(GgufQuantize, BytesEqualLlamaCppWithAndWithoutImportance) {
  // The inputs themselves first: a drifted generator would make every row below fail for no reason.
  const std::uint64_t input_hashes[kGoldenCases] = {0x639c1f2118633ad0, 0xb7855ed0bb02b57e, 0xd1e0f7902d917ce7, 0x4c2fdb74ef55b255,
                                                    0x4112e84523157a87, 0xe0113e62149b1b25, 0xb93a0c83ce3b6325, 0xaaf9ed236c280909};
  std::vector<std::vector<float>> inputs;
  for (int c = 0; c < kGoldenCases; ++c) {
    inputs.push_back(golden_input(c));
    ASSERT_EQ(fnv1a(inputs[c].data(), inputs[c].size() * sizeof(float)), input_hashes[c]) << "input " << c;
  }
  const std::vector<float> imp = golden_importance();
  ASSERT_EQ(fnv1a(imp.data(), imp.size() * sizeof(float)), 0x5b134baf488114b3u);

  for (const Golden& g : kGoldens) {
    for (int c = 0; c < kGoldenCases; ++c) {
      const auto plain = quantize(g.type, inputs[c], kGoldenRow);
      EXPECT_EQ(fnv1a(plain.data(), plain.size()), g.plain[c]) << name(g.type) << " input " << c;
      const auto weighted = quantize(g.type, inputs[c], kGoldenRow, imp.data());
      EXPECT_EQ(fnv1a(weighted.data(), weighted.size()), g.importance[c]) << name(g.type) << " input " << c << " with importance";
    }
  }
}

struct Bound {
  GgmlType type;
  double rel_rmse;   // ||x - q(x)|| / ||x|| on gaussian rows
  double max_error;  // largest |x - q(x)| over the block's (super-block's) max |x|
};

// Legacy types: half a step of the block's grid (a full step on the clamped side of the symmetric
// types), plus 2% for the f16 rounding of d and m. k-quants: measured worst case plus ~20%, as no
// closed form holds once scales are 6-bit and searched.
const Bound kBounds[] = {
    {GgmlType::Q4_0, 0.10, 1.02 / 8},
    {GgmlType::Q4_1, 0.095, 1.02 / 15},
    {GgmlType::Q5_0, 0.052, 1.02 / 16},
    {GgmlType::Q5_1, 0.046, 1.02 / 31},
    {GgmlType::Q8_0, 0.0065, 1.0 / 254 + 1.0 / 2048},
    {GgmlType::Q2_K, 0.35, 0.43},
    {GgmlType::Q3_K, 0.18, 0.23},
    {GgmlType::Q4_K, 0.086, 0.095},
    {GgmlType::Q5_K, 0.044, 0.062},
    {GgmlType::Q6_K, 0.022, 0.02},
};

std::vector<float> gaussian(std::int64_t n, float sigma, std::uint32_t seed, double outlier_rate = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) {
    v = normal(rng);
    if (u(rng) < outlier_rate) v *= 50;
  }
  return x;
}

double max_error_over_absmax(const std::vector<float>& x, const std::vector<float>& y, std::size_t block) {
  double worst = 0;
  for (std::size_t b = 0; b < x.size(); b += block) {
    double amax = 0, err = 0;
    for (std::size_t i = b; i < b + block; ++i) {
      amax = std::max(amax, static_cast<double>(std::fabs(x[i])));
      err = std::max(err, static_cast<double>(std::fabs(x[i] - y[i])));
    }
    if (amax > 0) worst = std::max(worst, err / amax);
  }
  return worst;
}

double rel_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    num += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    den += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

TEST(GgufQuantize, ErrorWithinTheTypesBoundOnGaussianAndOutlierRows) {
  constexpr std::int64_t kRow = 1024;
  const auto plain = gaussian(64 * kRow, 0.02f, 1);
  const auto outliers = gaussian(64 * kRow, 0.02f, 2, 0.01);
  for (const Bound& b : kBounds) {
    const std::size_t block = mo::ggml_type_info(b.type)->block_size;
    const auto y = dequantize(b.type, quantize(b.type, plain, kRow), plain.size());
    EXPECT_LT(rel_rmse(plain, y), b.rel_rmse) << name(b.type);
    EXPECT_LT(max_error_over_absmax(plain, y, block), b.max_error) << name(b.type);
    const auto yo = dequantize(b.type, quantize(b.type, outliers, kRow), outliers.size());
    EXPECT_LT(max_error_over_absmax(outliers, yo, block), b.max_error) << name(b.type) << " with outliers";
  }
}

TEST(GgufQuantize, ConstantRowsKeepTheirValueAndZeroRowsStayZero) {
  const std::vector<float> equal(512, 0.37f), zeros(512, 0.0f);
  for (GgmlType t : kBlockTypes) {
    for (float v : dequantize(t, quantize(t, equal, 512), 512)) {
      ASSERT_NEAR(v, 0.37f, 0.37f * 1e-3f) << name(t);  // only the f16 rounding of the scale
    }
    for (float v : dequantize(t, quantize(t, zeros, 512), 512)) ASSERT_EQ(v, 0.0f) << name(t);
  }
}

// Below ~6e-5 a block's f16 scale is subnormal or zero, so precision collapses (llama.cpp's bytes
// are the same: golden input 7); what must hold is that nothing blows up.
TEST(GgufQuantize, TinyValuesStayFiniteAndBounded) {
  const auto x = gaussian(4 * 1024, 1e-6f, 3);
  double amax = 0;
  for (float v : x) amax = std::max(amax, static_cast<double>(std::fabs(v)));
  for (GgmlType t : kBlockTypes) {
    for (float v : dequantize(t, quantize(t, x, 1024), x.size())) {
      ASSERT_TRUE(std::isfinite(v)) << name(t);
      ASSERT_LE(std::fabs(v), 4 * amax) << name(t);
    }
  }
}

// Re-encoding what a legacy block decodes to gives the same bytes back for weights in f16's normal
// range (llama.cpp promises nothing; it follows from its arithmetic): the block's extreme value lands
// exactly on the grid, so d (and m) come out the same and every weight rounds to its own code. The
// k-quants re-run their scale search, which may settle elsewhere; they only must not drift.
TEST(GgufQuantize, RequantizingADequantizedRowIsStable) {
  constexpr std::int64_t kRow = 1024;
  for (const auto& x : {gaussian(16 * kRow, 0.02f, 4), gaussian(16 * kRow, 0.02f, 5, 0.01)}) {
    for (GgmlType t : kBlockTypes) {
      const auto q = quantize(t, x, kRow);
      const auto y = dequantize(t, q, x.size());
      const auto q2 = quantize(t, y, kRow);
      if (mo::ggml_type_info(t)->block_size == 32) {
        EXPECT_EQ(q2, q) << name(t);
      } else {
        EXPECT_LE(rel_rmse(y, dequantize(t, q2, x.size())), rel_rmse(x, y)) << name(t);
      }
    }
  }
}

TEST(GgufQuantize, ImportanceLowersTheWeightedError) {
  constexpr std::int64_t kRow = 1024;
  const auto x = gaussian(32 * kRow, 0.02f, 6);
  // One column in ten matters a hundred times more, as hot input channels do in real imatrix data.
  std::vector<float> imp(kRow);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0, 1);
  for (float& w : imp) w = (u(rng) < 0.1f ? 100.0f : 1.0f) * (0.5f + u(rng));
  auto weighted_sse = [&](const std::vector<float>& y) {
    double e = 0;
    for (std::size_t i = 0; i < x.size(); ++i) e += imp[i % kRow] * (static_cast<double>(x[i]) - y[i]) * (x[i] - y[i]);
    return e;
  };
  for (GgmlType t : kBlockTypes) {
    const double without = weighted_sse(dequantize(t, quantize(t, x, kRow), x.size()));
    const double with = weighted_sse(dequantize(t, quantize(t, x, kRow, imp.data()), x.size()));
    if (t == GgmlType::Q8_0) {
      EXPECT_EQ(with, without) << "Q8_0 ignores importance, as llama.cpp does";
    } else {
      EXPECT_LT(with, 0.9 * without) << name(t);
    }
  }
}

// Without importance blocks are independent, so a matrix may be encoded in one call; with importance
// the legacy types use the row's mean square, so the row length changes the bytes.
TEST(GgufQuantize, RowLengthMattersOnlyWithImportance) {
  const auto x = gaussian(2048, 0.02f, 8);
  std::vector<float> imp(2048, 1.0f);
  for (GgmlType t : kBlockTypes) {
    EXPECT_EQ(quantize(t, x, 2048), quantize(t, x, 1024)) << name(t);
  }
  for (std::size_t i = 0; i < 1024; ++i) imp[i] = 0.5f + static_cast<float>(i % 7);
  std::copy(imp.begin(), imp.begin() + 1024, imp.begin() + 1024);
  EXPECT_NE(quantize(GgmlType::Q4_0, x, 2048, imp.data()), quantize(GgmlType::Q4_0, x, 1024, imp.data()));
}

TEST(GgufQuantize, FloatTypesRoundToNearestEven) {
  // Each pair is a tie between two neighbours: it goes to the even mantissa, down for the first, up
  // for the second.
  const std::vector<float> x = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -65520.0f};
  std::uint16_t h[5], b[5];
  float f[5];
  gguf_quantize_row(id(GgmlType::F16), x.data(), h, 5);
  EXPECT_EQ(h[0], 0x3c00);
  EXPECT_EQ(h[1], 0x3c02);
  EXPECT_EQ(h[4], 0xfc00);  // past f16's range: -inf
  gguf_quantize_row(id(GgmlType::BF16), x.data(), b, 5);
  EXPECT_EQ(b[2], 0x3f80);
  EXPECT_EQ(b[3], 0x3f82);
  gguf_quantize_row(id(GgmlType::F32), x.data(), f, 5);
  EXPECT_EQ(std::vector<float>(f, f + 5), x);
}

TEST(GgufQuantize, RejectsUnsupportedTypesAndPartialBlocks) {
  const std::vector<float> x(256, 1.0f);
  std::vector<std::uint8_t> out(1024);
  for (GgmlType t : kBlockTypes) EXPECT_TRUE(gguf_can_quantize(id(t))) << name(t);
  EXPECT_FALSE(gguf_can_quantize(id(GgmlType::IQ2_XXS)));
  EXPECT_FALSE(gguf_can_quantize(id(GgmlType::Q8_K)));
  EXPECT_FALSE(gguf_can_quantize(4));  // a removed type id
  auto error_of = [&](std::uint32_t type, std::int64_t n) -> std::string {
    try {
      gguf_quantize_row(type, x.data(), out.data(), n);
    } catch (const mo::Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error_of(id(GgmlType::IQ2_XXS), 256), "cannot quantize to ggml type 16 (iq2_xxs)");
  EXPECT_EQ(error_of(id(GgmlType::Q4_K), 128), "cannot quantize 128 weights to ggml type 12 (q4_K): not a multiple of its block size 256");
  EXPECT_EQ(error_of(id(GgmlType::Q4_0), -32), "cannot quantize -32 weights to ggml type 2 (q4_0): not a multiple of its block size 32");
}

}  // namespace
