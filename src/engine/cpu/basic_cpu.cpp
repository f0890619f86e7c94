#include <cmath>

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

void silu_mul(float* gate, const float* up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void softmax(float* x, std::int64_t n) {
  float mx = x[0];
  for (std::int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace mo::ops
