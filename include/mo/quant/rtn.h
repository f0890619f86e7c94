#pragma once
// Round-to-nearest, the baseline every other method must beat. The per-group parameter rule the others
// share (GPTQ's Quantizer.find_params) is formats/group_params.h, which the CUDA kernels use too.
#include <cstdint>

#include "mo/formats/group_params.h"
#include "mo/formats/quantized_linear.h"

namespace mo::quant {

using formats::GroupParams;

// Parameters for the `n` weights w[0], w[stride], ..., w[(n-1)*stride].
inline GroupParams find_group_params(const float* w, std::int64_t n, std::int64_t stride, const formats::QuantScheme& scheme) {
  return formats::group_params(w, n, stride, scheme.bits, scheme.sym);
}
inline int quantize_value(float w, const GroupParams& p, int bits) { return formats::quantize_code(w, p, bits); }  // clamped to [0, 2^bits)

// w: [rows, cols] row-major. Group g covers columns [g*G, (g+1)*G) (the last may be shorter).
formats::QuantizedLinear quantize_rtn(const float* w, std::int64_t rows, std::int64_t cols, const formats::QuantScheme& scheme);

}  // namespace mo::quant
