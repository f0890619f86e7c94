#include "mo/quant/rtn.h"

#include <algorithm>

namespace mo::quant {

formats::QuantizedLinear quantize_rtn(const float* w, std::int64_t rows, std::int64_t cols, const formats::QuantScheme& scheme) {
  formats::QuantizedLinear out;
  out.rows = rows;
  out.cols = cols;
  out.scheme = scheme;
  const std::int64_t g = scheme.effective_group(cols);
  const int n_groups = scheme.groups(cols);
  out.q.resize(static_cast<std::size_t>(rows * cols));
  out.scales.resize(static_cast<std::size_t>(rows) * n_groups);
  out.zeros.resize(static_cast<std::size_t>(rows) * n_groups);
  out.g_idx.resize(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c) out.g_idx[c] = static_cast<std::int32_t>(c / g);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int gi = 0; gi < n_groups; ++gi) {
      const std::int64_t c0 = gi * g, c1 = std::min(cols, c0 + g);
      const float* row = w + r * cols;
      const GroupParams p = find_group_params(row + c0, c1 - c0, 1, scheme);
      out.scales[r * n_groups + gi] = p.scale_f16;
      out.zeros[r * n_groups + gi] = static_cast<std::uint8_t>(p.zero);
      for (std::int64_t c = c0; c < c1; ++c) out.q[r * cols + c] = static_cast<std::uint8_t>(quantize_value(row[c], p, scheme.bits));
    }
  }
  return out;
}

}  // namespace mo::quant
