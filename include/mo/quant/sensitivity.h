#pragma once
// How much a linear layer suffers from quantization: statistics of its weights (heavy tails and
// outliers quantize badly) and the similarity of its outputs on calibration inputs before and after.
#include <cstdint>

#include "mo/engine/backend.h"

namespace mo::quant {

struct WeightStats {
  double variance = 0;
  double kurtosis = 0;          // excess kurtosis: 0 for a Gaussian, large for heavy tails
  double max_mean_ratio = 0;    // max|w| / mean|w|
  double outlier_fraction = 0;  // share of weights beyond 6 standard deviations from the mean
};
WeightStats weight_stats(const float* w, std::int64_t n);

struct OutputError {
  double cosine = 1;   // cosine similarity of the flattened outputs
  double rel_l2 = 0;   // ||y - yq|| / ||y||
  double max_abs = 0;  // max |y - yq|
};
// y = x·Wᵀ vs yq = x·Wqᵀ for x [n, cols], W and Wq [rows, cols], computed on `device` (x, w and wq are
// host memory, uploaded for the two products).
OutputError output_error(engine::Backend& device, const float* x, std::int64_t n, const float* w, const float* wq, std::int64_t rows,
                         std::int64_t cols);

}  // namespace mo::quant
