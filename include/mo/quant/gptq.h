#pragma once
// GPTQ (Frantar et al. 2022) as AutoGPTQ implements it (quantization/gptq.py fasterquant): Hessian
// from the layer's calibration inputs, dead columns, dampening, optional act-order with static
// groups, lazy block updates, group parameters from rtn.h's rule. Cholesky work in float64. The heavy
// steps run as backend ops (backend.h), on the device the caller picks: the Hessian's rank-k updates,
// the Cholesky factor of H^-1, the column sweep and the block updates; dead columns, act-order and the
// dampening read H on the host.
#include <cstdint>
#include <vector>

#include "mo/engine/backend.h"
#include "mo/formats/quantized_linear.h"

namespace mo::quant {

// H = 2/n * sum over tokens of x x^T (the running mean of AutoGPTQ's add_batch), in float64, kept in
// the backend's memory.
class HessianAccumulator {
 public:
  HessianAccumulator(engine::Backend& backend, std::int64_t dim);
  void add(const float* x, std::int64_t n);       // x: [n, dim] in the backend's memory
  void add_host(const float* x, std::int64_t n);  // x: [n, dim] in host memory (copied to a GPU first)
  std::int64_t dim() const { return dim_; }
  std::int64_t tokens() const { return tokens_; }
  engine::Backend& backend() const { return *b_; }
  std::vector<double> h() const;  // a host copy, [dim, dim], symmetric
 private:
  engine::Backend* b_;
  std::int64_t dim_ = 0, tokens_ = 0;
  engine::DeviceBuffer h_, staging_;
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

// w: [rows, cols] row-major f32 in host memory; hessian.dim() == cols. Runs on hessian.backend(). Throws Error when H cannot be made
// positive definite even after raising the dampening.
GptqResult gptq_quantize(const float* w, std::int64_t rows, std::int64_t cols, const HessianAccumulator& hessian,
                         const formats::QuantScheme& scheme, const GptqOptions& options);

}  // namespace mo::quant
