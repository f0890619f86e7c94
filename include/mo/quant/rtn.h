#pragma once
// Round-to-nearest, the baseline every other method must beat, and the per-group parameter rule the
// others share (GPTQ's Quantizer.find_params): asymmetric takes the range [min(w, 0), max(w, 0)],
// scale = range / (2^bits - 1), zero = round(-min / scale); symmetric takes absmax, scale =
// 2 * absmax / (2^bits - 1), zero = 2^(bits-1). An all-zero group gets range [-1, 1]. The scale is
// rounded to f16 (what the formats store) before codes are computed: q = clamp(round(w / scale) + zero).
#include <cstdint>

#include "mo/formats/quantized_linear.h"

namespace mo::quant {

struct GroupParams {
  std::uint16_t scale_f16 = 0;
  int zero = 0;
};

// Parameters for the `n` weights w[0], w[stride], ..., w[(n-1)*stride].
GroupParams find_group_params(const float* w, std::int64_t n, std::int64_t stride, const formats::QuantScheme& scheme);
int quantize_value(float w, const GroupParams& p, int bits);  // the code, clamped to [0, 2^bits)

// w: [rows, cols] row-major. Group g covers columns [g*G, (g+1)*G) (the last may be shorter).
formats::QuantizedLinear quantize_rtn(const float* w, std::int64_t rows, std::int64_t cols, const formats::QuantScheme& scheme);

}  // namespace mo::quant
