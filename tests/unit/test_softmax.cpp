// The CPU softmax (attention's weights) against a double-precision reference, for every length a context can
// have: the polynomial exp and the 16 partial sums must stay within a few float ulps.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "mo/engine/ops/basic.h"

namespace {

void expect_softmax_close(std::vector<float> x) {
  const std::size_t n = x.size();
  double mx = x[0], sum = 0;
  for (float v : x) mx = std::max(mx, static_cast<double>(v));
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) sum += ref[i] = std::exp(static_cast<double>(x[i]) - mx);
  const std::vector<float> x0 = x;
  mo::ops::softmax(x.data(), static_cast<std::int64_t>(n));
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double want = ref[i] / sum, d = std::fabs(static_cast<double>(x0[i]) - mx);
    // exp to ~2e-7 relative and the scale to ~1e-7, plus what rounding x - max to a float costs any f32 softmax
    // (half an ulp of |x - max|, times e^... : |x - max| * 2^-24 relative).
    ASSERT_NEAR(x[i], want, (1e-6 + d * 6e-8) * want) << "n " << n << ", element " << i;
    total += x[i];
  }
  EXPECT_NEAR(total, 1.0, 1e-5) << "n " << n;
}

TEST(Softmax, MatchesDoubleReferenceForEveryLength) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> score(-30.0f, 30.0f);
  for (std::size_t n = 1; n <= 70; ++n) {
    std::vector<float> x(n);
    for (float& v : x) v = score(rng);
    expect_softmax_close(x);
  }
  for (std::size_t n : {127u, 128u, 129u, 1000u, 4099u}) {
    std::vector<float> x(n);
    for (float& v : x) v = score(rng);
    expect_softmax_close(x);
  }
}

TEST(Softmax, FarBelowTheMaximumGivesNegligibleWeight) {
  // e^-1000 underflows; the polynomial clamps at e^-87.3, still far below anything a weighted sum notices.
  std::vector<float> x = {-1000.0f, -90.0f, -80.0f, 5.0f, 5.0f};
  mo::ops::softmax(x.data(), static_cast<std::int64_t>(x.size()));
  EXPECT_NEAR(x[3], 0.5f, 1e-6f);
  EXPECT_NEAR(x[4], 0.5f, 1e-6f);
  EXPECT_LT(x[0], 1e-37f);
  EXPECT_LT(x[1], 1e-37f);
  EXPECT_NEAR(x[2], std::exp(-85.0) / 2, 1e-6 * std::exp(-85.0));  // still in range: exact to float precision
  EXPECT_EQ(std::vector<float>(1, 1.0f), [] {
    std::vector<float> one = {-3.5f};
    mo::ops::softmax(one.data(), 1);
    return one;
  }());
}

}  // namespace
