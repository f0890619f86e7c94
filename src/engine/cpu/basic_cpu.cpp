#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "fused_madd.h"
#include "mo/engine/ops/basic.h"

namespace mo::ops {

void rms_norm(const float* x, const float* w, float* out, std::int64_t n, std::int64_t d, float eps) {
  for (std::int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * d;
    float* ot = out + t * d;
    double ss = 0;  // the mean square in double: rows of 8k values lose digits in f32
    for (std::int64_t i = 0; i < d; ++i) ss += static_cast<double>(xt[i]) * xt[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / d + eps));
    for (std::int64_t i = 0; i < d; ++i) ot[i] = xt[i] * scale * w[i];
  }
}

void rope(float* x, std::int64_t n_heads, std::int64_t head_dim, std::int64_t pos, float theta, float freq_scale,
          std::span<const float> factors, engine::RopeStyle style) {
  const std::int64_t half = head_dim / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    double angle = static_cast<double>(pos) * freq_scale * std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
    if (!factors.empty()) angle /= factors[i];
    const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
    for (std::int64_t h = 0; h < n_heads; ++h) {
      float* xh = x + h * head_dim;
      const std::int64_t a = style == engine::RopeStyle::normal ? 2 * i : i;
      const std::int64_t b = style == engine::RopeStyle::normal ? 2 * i + 1 : i + half;
      const float x0 = xh[a], x1 = xh[b];
      xh[a] = x0 * c - x1 * s;
      xh[b] = x0 * s + x1 * c;
    }
  }
}

namespace {

// e^x for x in any range (clamped to [-87.3, 88]: the result stays a normal float), Cephes' expf: x = n ln2 + r,
// a degree-6 polynomial for e^r, then 2^n through the exponent bits. Relative error about 2e-7; branch-free, so
// loops over it vectorize, and each element's value never depends on its neighbours.
inline float exp_poly(float x) {
  x = std::min(std::max(x, -87.3f), 88.0f);
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer kept in the low mantissa bits
  const float t = madd(x, 1.44269504088896341f, kShift);
  const float n = t - kShift;
  const std::int32_t ni = std::bit_cast<std::int32_t>(t) - std::bit_cast<std::int32_t>(kShift);
  const float r = madd(n, 2.12194440e-4f, madd(n, -0.693359375f, x));
  float p = 1.9875691500e-4f;
  p = madd(p, r, 1.3981999507e-3f);
  p = madd(p, r, 8.3334519073e-3f);
  p = madd(p, r, 4.1665795894e-2f);
  p = madd(p, r, 1.6666665459e-1f);
  p = madd(p, r, 5.0000001201e-1f);
  p = madd(p, r * r, r) + 1.0f;
  return p * std::bit_cast<float>((ni + 127) << 23);
}

}  // namespace

void silu_mul(float* __restrict gate, const float* __restrict up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + exp_poly(-gate[i])) * up[i];
}

void softmax(float* __restrict x, std::int64_t n) {
  constexpr int kLanes = 16;  // fixed partial maxima and sums: the result depends on n only, never on the SIMD width
  float mx_l[kLanes], sum_l[kLanes];
  std::fill(mx_l, mx_l + kLanes, x[0]);
  std::fill(sum_l, sum_l + kLanes, 0.0f);
  const std::int64_t body = n / kLanes * kLanes;
  for (std::int64_t i = 0; i < body; i += kLanes)
    for (int j = 0; j < kLanes; ++j) mx_l[j] = mx_l[j] > x[i + j] ? mx_l[j] : x[i + j];
  float mx = *std::max_element(mx_l, mx_l + kLanes);
  for (std::int64_t i = body; i < n; ++i) mx = std::max(mx, x[i]);
  for (std::int64_t i = 0; i < n; ++i) x[i] = exp_poly(x[i] - mx);
  for (std::int64_t i = 0; i < body; i += kLanes)
    for (int j = 0; j < kLanes; ++j) sum_l[j] += x[i + j];
  double sum = 0;
  for (int j = 0; j < kLanes; ++j) sum += sum_l[j];
  for (std::int64_t i = body; i < n; ++i) sum += x[i];
  const float inv = static_cast<float>(1.0 / sum);
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace mo::ops
