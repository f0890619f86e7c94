#include "mo/quant/sensitivity.h"

#include <cblas.h>

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

OutputError output_error(const float* x, std::int64_t n, const float* w, const float* wq, std::int64_t rows, std::int64_t cols) {
  OutputError e;
  if (n == 0) return e;
  std::vector<float> y(static_cast<std::size_t>(n * rows)), yq(y.size());
  const int N = static_cast<int>(n), R = static_cast<int>(rows), C = static_cast<int>(cols);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, R, C, 1.0f, x, C, w, C, 0.0f, y.data(), R);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, R, C, 1.0f, x, C, wq, C, 0.0f, yq.data(), R);
  double dot = 0, yy = 0, qq = 0, dd = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double a = y[i], b = yq[i], d = a - b;
    dot += a * b;
    yy += a * a;
    qq += b * b;
    dd += d * d;
    e.max_abs = std::max(e.max_abs, std::fabs(d));
  }
  e.cosine = (yy > 0 && qq > 0) ? dot / std::sqrt(yy * qq) : (yy == qq ? 1.0 : 0.0);
  e.rel_l2 = yy > 0 ? std::sqrt(dd / yy) : std::sqrt(dd);
  return e;
}

}  // namespace mo::quant
