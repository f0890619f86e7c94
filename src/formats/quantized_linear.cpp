#include "mo/formats/quantized_linear.h"

#include "mo/core/half.h"

namespace mo::formats {

float QuantizedLinear::weight(std::int64_t r, std::int64_t c) const {
  const std::size_t g = static_cast<std::size_t>(r) * n_groups() + g_idx[c];
  return static_cast<float>(static_cast<int>(q[r * cols + c]) - static_cast<int>(zeros[g])) * f16_to_f32(scales[g]);
}

std::vector<float> QuantizedLinear::dequantize() const {
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) w[r * cols + c] = weight(r, c);
  return w;
}

bool QuantizedLinear::contiguous_groups() const {
  const std::int64_t g = scheme.effective_group(cols);
  for (std::int64_t c = 0; c < cols; ++c)
    if (g_idx[c] != c / g) return false;
  return true;
}

}  // namespace mo::formats
