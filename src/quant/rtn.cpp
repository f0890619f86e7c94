#include "mo/quant/rtn.h"

#include <algorithm>
#include <cmath>

#include "mo/core/half.h"

namespace mo::quant {

namespace {

constexpr std::uint16_t kF16MinSubnormal = 0x0001;
constexpr std::uint16_t kF16Max = 0x7bff;  // 65504

}  // namespace

GroupParams find_group_params(const float* w, std::int64_t n, std::int64_t stride, const formats::QuantScheme& scheme) {
  const int maxq = (1 << scheme.bits) - 1;
  float lo = 0.0f, hi = 0.0f;  // the range always contains 0, so zero is exactly representable
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = w[i * stride];
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (scheme.sym) {
    hi = std::max(-lo, hi);
    lo = -hi;
  }
  if (lo == 0.0f && hi == 0.0f) {
    lo = -1.0f;
    hi = 1.0f;
  }
  std::uint16_t s16 = f32_to_f16((hi - lo) / static_cast<float>(maxq));
  // Tiny groups would round to a zero scale (and huge ones to inf); keep the nearest usable f16.
  if ((s16 & 0x7fff) == 0) s16 = kF16MinSubnormal;
  if ((s16 & 0x7fff) >= 0x7c00) s16 = kF16Max;
  GroupParams p;
  p.scale_f16 = s16;
  if (scheme.sym) {
    p.zero = (maxq + 1) / 2;
  } else {
    // From the stored (f16) scale, so code `zero` dequantizes to exactly 0.
    const float z = std::nearbyint(-lo / f16_to_f32(s16));
    p.zero = static_cast<int>(std::clamp(z, 0.0f, static_cast<float>(maxq)));
  }
  return p;
}

int quantize_value(float w, const GroupParams& p, int bits) {
  const int maxq = (1 << bits) - 1;
  // Division (not a reciprocal multiply) and round-half-even, as torch.round(x / scale) does.
  const float q = std::nearbyint(w / f16_to_f32(p.scale_f16)) + static_cast<float>(p.zero);
  if (!(q >= 0.0f)) return 0;  // also maps NaN to code 0 instead of undefined behaviour
  return static_cast<int>(std::min(q, static_cast<float>(maxq)));
}

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
