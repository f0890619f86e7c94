#pragma once
// GPTQ (Frantar et al. 2022) as AutoGPTQ implements it (quantization/gptq.py fasterquant): Hessian
// from the layer's calibration inputs, dead columns, dampening, optional act-order with static
// groups, lazy block updates, group parameters from rtn.h's rule. Cholesky work in float64.
#include <cstdint>
#include <vector>

#include "mo/formats/quantized_linear.h"

namespace mo::quant {

// H = 2/n * sum over tokens of x x^T (the running mean of AutoGPTQ's add_batch), in float64.
class HessianAccumulator {
 public:
  explicit HessianAccumulator(std::int64_t dim);
  void add(const float* x, std::int64_t n);  // x: [n, dim]
  std::int64_t dim() const { return dim_; }
  std::int64_t tokens() const { return tokens_; }
  const std::vector<double>& h() const { return h_; }  // [dim, dim], symmetric
 private:
  std::int64_t dim_ = 0, tokens_ = 0;
  std::vector<double> h_;
};

struct GptqOptions {
  double damp_percent = 0.01;  // H += damp_percent * mean(diag H) * I
  bool desc_act = false;       // act-order: columns by descending diag(H)
  bool static_groups = true;   // group params from the unpermuted weights up front (keeps g_idx = i / G)
  int block_size = 128;        // lazy-batch block width
};

struct GptqResult {
  formats::QuantizedLinear q;
  double loss = 0;       // sum of (w - q)^2 / U_ii^2 over the sweep, AutoGPTQ's "error"
  int dead_columns = 0;  // inputs never active in the calibration data (H_ii == 0): weights zeroed
  double damp_used = 0;  // the dampening that made H positive definite (raised x10 when Cholesky fails)
};

// w: [rows, cols] row-major f32; hessian.dim() == cols. Throws Error when H cannot be made positive
// definite even after raising the dampening.
GptqResult gptq_quantize(const float* w, std::int64_t rows, std::int64_t cols, const HessianAccumulator& hessian,
                         const formats::QuantScheme& scheme, const GptqOptions& options);

}  // namespace mo::quant
