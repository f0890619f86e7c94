#include "mo/quant/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mo::quant {

WeightStats weight_stats(const float* w, std::int64_t n) {
  WeightStats s;
  if (n == 0) return s;
  double sum = 0, abs_sum = 0, max_abs = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    sum += w[i];
    abs_sum += std::fabs(w[i]);
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(w[i])));
  }
  const double mean = sum / n;
  double m2 = 0, m4 = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = w[i] - mean, d2 = d * d;
    m2 += d2;
    m4 += d2 * d2;
  }
  m2 /= n;
  m4 /= n;
  s.variance = m2;
  s.kurtosis = m2 > 0 ? m4 / (m2 * m2) - 3.0 : 0;
  s.max_mean_ratio = abs_sum > 0 ? max_abs / (abs_sum / n) : 0;
  const double limit = 6.0 * std::sqrt(m2);
  std::int64_t outliers = 0;
  for (std::int64_t i = 0; i < n; ++i) outliers += std::fabs(w[i] - mean) > limit;
  s.outlier_fraction = static_cast<double>(outliers) / n;
  return s;
}

OutputError output_error(engine::Backend& device, const float* x, std::int64_t n, const float* w, const float* wq, std::int64_t rows,
                         std::int64_t cols) {
  OutputError e;
  if (n == 0) return e;
  const auto count = [](std::int64_t a, std::int64_t b) { return static_cast<std::size_t>(a * b); };
  const engine::DeviceBuffer dx = engine::to_device(device, x, count(n, cols)), dw = engine::to_device(device, w, count(rows, cols)),
                             dwq = engine::to_device(device, wq, count(rows, cols));
  engine::DeviceBuffer y(device, static_cast<std::size_t>(n * rows) * sizeof(float)), yq(device, y.bytes());
  device.gemm(false, true, n, rows, cols, 1.0f, dx.as<float>(), cols, dw.as<float>(), cols, 0.0f, y.as<float>(), rows);
  device.gemm(false, true, n, rows, cols, 1.0f, dx.as<float>(), cols, dwq.as<float>(), cols, 0.0f, yq.as<float>(), rows);
  const engine::ErrorSums s = device.error_sums(y.as<float>(), yq.as<float>(), n * rows);
  e.max_abs = s.max_abs;
  e.cosine = (s.aa > 0 && s.bb > 0) ? s.ab / std::sqrt(s.aa * s.bb) : (s.aa == s.bb ? 1.0 : 0.0);
  e.rel_l2 = s.aa > 0 ? std::sqrt(s.dd / s.aa) : std::sqrt(s.dd);
  return e;
}

}  // namespace mo::quant
