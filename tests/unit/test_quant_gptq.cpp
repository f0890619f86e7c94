#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/backend.h"
#include "mo/quant/gptq.h"
#include "mo/quant/rtn.h"

namespace formats = mo::formats;

using namespace mo;
using namespace mo::quant;

namespace {

// GPTQ runs on a backend; these tests use the CPU one (tests/ops/quant_op_tests.h compares the GPU's).
engine::Backend& cpu() {
  static ThreadPool pool(1);
  static const std::unique_ptr<engine::Backend> b = engine::make_cpu_backend(pool);
  return *b;
}

constexpr std::int64_t kRows = 48, kCols = 160, kTokens = 600;  // 160 = 5 groups of 32, > one 128 block

// Calibration inputs whose channels are correlated (a rank-12 mixture plus a little noise) and of uneven
// magnitude, the situation where GPTQ's error feedback pays off.
std::vector<float> correlated_inputs(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::int64_t k = 12;
  std::vector<float> a(k * kCols), x(kTokens * kCols);
  for (float& v : a) v = nd(rng);
  for (std::int64_t t = 0; t < kTokens; ++t) {
    float z[k];
    for (float& v : z) v = nd(rng);
    for (std::int64_t c = 0; c < kCols; ++c) {
      float s = 0.1f * nd(rng);
      for (std::int64_t j = 0; j < k; ++j) s += z[j] * a[j * kCols + c];
      x[t * kCols + c] = s * (0.3f + static_cast<float>((c * 37) % 11));
    }
  }
  return x;
}

std::vector<float> random_weight(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> w(kRows * kCols);
  for (float& v : w) v = nd(rng);
  return w;
}

// ||X W^T - X Q^T||^2 over the calibration tokens.
double output_error(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& q) {
  double err = 0;
  for (std::int64_t t = 0; t < kTokens; ++t) {
    for (std::int64_t r = 0; r < kRows; ++r) {
      double d = 0;
      for (std::int64_t c = 0; c < kCols; ++c) d += static_cast<double>(x[t * kCols + c]) * (w[r * kCols + c] - q[r * kCols + c]);
      err += d * d;
    }
  }
  return err;
}

HessianAccumulator hessian_of(const std::vector<float>& x) {
  HessianAccumulator h(cpu(), kCols);
  h.add(x.data(), kTokens);
  return h;
}

formats::QuantScheme scheme(int group, bool sym = false) {
  formats::QuantScheme s;
  s.bits = 4;
  s.group_size = group;
  s.sym = sym;
  return s;
}

}  // namespace

TEST(QuantGptq, HessianIsRunningMeanOfTwoOverNTimesXtX) {
  const std::vector<float> x = correlated_inputs(1);
  HessianAccumulator h(cpu(), kCols);
  h.add(x.data(), 100);
  h.add(x.data() + 100 * kCols, kTokens - 100);
  EXPECT_EQ(h.tokens(), kTokens);
  for (std::int64_t i = 0; i < kCols; i += 7) {
    for (std::int64_t j = 0; j < kCols; j += 5) {
      double ref = 0;
      for (std::int64_t t = 0; t < kTokens; ++t) ref += static_cast<double>(x[t * kCols + i]) * x[t * kCols + j];
      ref *= 2.0 / kTokens;
      EXPECT_NEAR(h.h()[i * kCols + j], ref, 1e-5 * (std::fabs(ref) + 1.0)) << i << "," << j;
      EXPECT_EQ(h.h()[i * kCols + j], h.h()[j * kCols + i]);
    }
  }
}

TEST(QuantGptq, LowerOutputErrorThanRtn) {
  const std::vector<float> x = correlated_inputs(2), w = random_weight(3);
  const HessianAccumulator h = hessian_of(x);
  for (const formats::QuantScheme& s : {scheme(32), scheme(32, true), scheme(-1)}) {
    const GptqResult g = gptq_quantize(w.data(), kRows, kCols, h, s, GptqOptions{});
    const double rtn = output_error(x, w, quantize_rtn(w.data(), kRows, kCols, s).dequantize());
    const double gptq = output_error(x, w, g.q.dequantize());
    EXPECT_LT(gptq, 0.7 * rtn) << "group " << s.group_size << " sym " << s.sym;
    EXPECT_EQ(g.q.n_groups(), s.groups(kCols));
    EXPECT_TRUE(g.q.contiguous_groups());
    EXPECT_EQ(g.dead_columns, 0);
    EXPECT_GT(g.loss, 0.0);
    EXPECT_GT(g.damp_used, 0.0);
  }
}

TEST(QuantGptq, ActOrderWithStaticGroupsKeepsGroupIndexAndScales) {
  const std::vector<float> x = correlated_inputs(4), w = random_weight(5);
  const HessianAccumulator h = hessian_of(x);
  GptqOptions opt;
  opt.desc_act = true;
  opt.static_groups = true;
  const GptqResult g = gptq_quantize(w.data(), kRows, kCols, h, scheme(32), opt);
  for (std::int64_t c = 0; c < kCols; ++c) EXPECT_EQ(g.q.g_idx[c], c / 32);
  EXPECT_TRUE(g.q.contiguous_groups());
  // Static groups take their parameters from the unpermuted weight up front: exactly RTN's.
  const formats::QuantizedLinear rtn = quantize_rtn(w.data(), kRows, kCols, scheme(32));
  EXPECT_EQ(g.q.scales, rtn.scales);
  EXPECT_EQ(g.q.zeros, rtn.zeros);
  EXPECT_LT(output_error(x, w, g.q.dequantize()), 0.7 * output_error(x, w, rtn.dequantize()));
}

TEST(QuantGptq, ActOrderWithoutStaticGroupsPermutesGroupIndex) {
  const std::vector<float> x = correlated_inputs(6), w = random_weight(7);
  GptqOptions opt;
  opt.desc_act = true;
  opt.static_groups = false;
  const GptqResult g = gptq_quantize(w.data(), kRows, kCols, hessian_of(x), scheme(32), opt);
  EXPECT_FALSE(g.q.contiguous_groups());
  std::vector<int> members(5, 0);
  for (std::int32_t gi : g.q.g_idx) ++members.at(gi);
  EXPECT_EQ(members, (std::vector<int>(5, 32)));
  EXPECT_LT(output_error(x, w, g.q.dequantize()), 0.7 * output_error(x, w, quantize_rtn(w.data(), kRows, kCols, scheme(32)).dequantize()));
}

TEST(QuantGptq, DeadColumnsAreZeroedAndCounted) {
  std::vector<float> x = correlated_inputs(8);
  const std::vector<float> w = random_weight(9);
  for (std::int64_t t = 0; t < kTokens; ++t) x[t * kCols + 3] = x[t * kCols + 130] = 0.0f;
  for (bool act_order : {false, true}) {
    GptqOptions opt;
    opt.desc_act = act_order;
    const GptqResult g = gptq_quantize(w.data(), kRows, kCols, hessian_of(x), scheme(32), opt);
    EXPECT_EQ(g.dead_columns, 2);
    const std::vector<float> dq = g.q.dequantize();
    for (std::int64_t r = 0; r < kRows; ++r) {
      EXPECT_EQ(dq[r * kCols + 3], 0.0f);
      EXPECT_EQ(dq[r * kCols + 130], 0.0f);
    }
  }
}

TEST(QuantGptq, NonFiniteInputsThrow) {
  std::vector<float> x = correlated_inputs(10);
  const std::vector<float> w = random_weight(11);
  x[5 * kCols + 17] = std::numeric_limits<float>::quiet_NaN();
  try {
    gptq_quantize(w.data(), kRows, kCols, hessian_of(x), scheme(32), GptqOptions{});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not positive definite"), std::string::npos) << e.what();
  }
}

TEST(QuantGptq, HessianOfWrongSizeThrows) {
  const std::vector<float> w = random_weight(12);
  HessianAccumulator h(cpu(), kCols - 1);
  EXPECT_THROW(gptq_quantize(w.data(), kRows, kCols, h, scheme(32), GptqOptions{}), Error);
}
