#pragma once
// How far two streams of output vectors (original vs quantized) are apart, accumulated over many
// tokens and samples: cosine similarity and relative L2 error of the flattened outputs, max abs error.
#include <cstdint>

#include "mo/engine/backend.h"

namespace mo::diagnose {

struct Metrics {
  double cosine = 1;   // of the flattened outputs; 1 when both are all zero
  double rel_l2 = 0;   // ||quantized - original|| / ||original||
  double max_abs = 0;  // max |quantized - original|
};

class MetricAccumulator {
 public:
  // original, quantized: n floats each.
  void add(const float* original, const float* quantized, std::int64_t n);
  // The same from a backend's sums over n values (a = original, b = quantized).
  void add(const engine::ErrorSums& s, std::int64_t n);
  Metrics result() const;
  bool empty() const { return count_ == 0; }

 private:
  double dot_ = 0, norm_o_ = 0, norm_q_ = 0, diff2_ = 0, max_abs_ = 0;
  std::int64_t count_ = 0;
};

}  // namespace mo::diagnose
