#include "mo/diagnose/metrics.h"

#include <algorithm>
#include <cmath>

namespace mo::diagnose {

void MetricAccumulator::add(const float* original, const float* quantized, std::int64_t n) {
  // Sums in double: a layer's outputs over a few thousand tokens reach 10^7 terms.
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = original[i], b = quantized[i], d = b - a;
    dot_ += a * b;
    norm_o_ += a * a;
    norm_q_ += b * b;
    diff2_ += d * d;
    max_abs_ = std::max(max_abs_, std::abs(d));
  }
  count_ += n;
}

void MetricAccumulator::add(const engine::ErrorSums& s, std::int64_t n) {
  dot_ += s.ab;
  norm_o_ += s.aa;
  norm_q_ += s.bb;
  diff2_ += s.dd;
  max_abs_ = std::max(max_abs_, s.max_abs);
  count_ += n;
}

Metrics MetricAccumulator::result() const {
  Metrics m;
  if (norm_o_ > 0 && norm_q_ > 0)
    m.cosine = std::clamp(dot_ / std::sqrt(norm_o_ * norm_q_), -1.0, 1.0);
  else if (norm_o_ > 0 || norm_q_ > 0)
    m.cosine = 0;  // one side all zero, the other not
  m.rel_l2 = norm_o_ > 0 ? std::sqrt(diff2_ / norm_o_) : (diff2_ > 0 ? INFINITY : 0.0);
  m.max_abs = max_abs_;
  return m;
}

}  // namespace mo::diagnose
