#pragma once
// The per-group integer quantization rule (GPTQ's Quantizer.find_params), one definition for the host
// quantizers (RTN, GPTQ, AWQ's search) and the CUDA kernels that run them on the device: asymmetric
// takes the range [min(w, 0), max(w, 0)], scale = range / (2^bits - 1), zero = round(-min / scale);
// symmetric takes absmax, scale = 2 * absmax / (2^bits - 1), zero = 2^(bits-1). An all-zero group gets
// range [-1, 1]. The scale is rounded to f16 (what the formats store) before codes are computed:
// q = clamp(round_half_even(w / scale) + zero, 0, 2^bits - 1).
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define MO_GQ_HD __host__ __device__ __forceinline__
#else
#include "mo/core/half.h"
#define MO_GQ_HD inline
#endif

namespace mo::formats {

struct GroupParams {
  std::uint16_t scale_f16 = 0;
  int zero = 0;
};

// Round to nearest even both ways: CUDA's conversion and core/half.h give the same bits.
MO_GQ_HD std::uint16_t gq_to_f16(float f) {
#if defined(__CUDACC__)
  return __half_as_ushort(__float2half_rn(f));
#else
  return f32_to_f16(f);
#endif
}
MO_GQ_HD float gq_from_f16(std::uint16_t h) {
#if defined(__CUDACC__)
  return __half2float(__ushort_as_half(h));
#else
  return f16_to_f32(h);
#endif
}

// Parameters for the n weights w[0], w[stride], ..., w[(n-1)*stride].
MO_GQ_HD GroupParams group_params(const float* w, std::int64_t n, std::int64_t stride, int bits, bool sym) {
  const int maxq = (1 << bits) - 1;
  float lo = 0.0f, hi = 0.0f;  // the range always contains 0, so zero is exactly representable
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = w[i * stride];
    lo = v < lo ? v : lo;  // std::min / std::max order: a NaN never replaces the running value
    hi = hi < v ? v : hi;
  }
  if (sym) {
    hi = hi < -lo ? -lo : hi;
    lo = -hi;
  }
  if (lo == 0.0f && hi == 0.0f) {
    lo = -1.0f;
    hi = 1.0f;
  }
  std::uint16_t s16 = gq_to_f16((hi - lo) / static_cast<float>(maxq));
  // Tiny groups would round to a zero scale (and huge ones to inf); keep the nearest usable f16.
  if ((s16 & 0x7fff) == 0) s16 = 0x0001;
  if ((s16 & 0x7fff) >= 0x7c00) s16 = 0x7bff;
  GroupParams p;
  p.scale_f16 = s16;
  if (sym) {
    p.zero = (maxq + 1) / 2;
  } else {
    // From the stored (f16) scale, so code `zero` dequantizes to exactly 0.
    const float z = nearbyintf(-lo / gq_from_f16(s16));
    p.zero = static_cast<int>(z < 0.0f ? 0.0f : static_cast<float>(maxq) < z ? static_cast<float>(maxq) : z);
  }
  return p;
}

// The code of w, clamped to [0, 2^bits). Division (not a reciprocal multiply) and round-half-even, as
// torch.round(x / scale) does; NaN maps to code 0.
MO_GQ_HD int quantize_code(float w, GroupParams p, int bits) {
  const float maxq = static_cast<float>((1 << bits) - 1);
  const float q = nearbyintf(w / gq_from_f16(p.scale_f16)) + static_cast<float>(p.zero);
  if (!(q >= 0.0f)) return 0;
  return static_cast<int>(maxq < q ? maxq : q);
}

// (q - zero) * scale: exact in f32 (|q - zero| < 2^9, an 11-bit scale mantissa).
MO_GQ_HD float dequantize_code(int q, GroupParams p) { return static_cast<float>(q - p.zero) * gq_from_f16(p.scale_f16); }

// w[0..n) = dequantize_code(quantize_code(w[i], p, bits), p), the same floats, with the scale widened once
// (f16 -> f32 per element is most of the cost on the host).
MO_GQ_HD void fake_quantize_group(float* w, std::int64_t n, GroupParams p, int bits) {
  const float s = gq_from_f16(p.scale_f16), maxq = static_cast<float>((1 << bits) - 1), z = static_cast<float>(p.zero);
  for (std::int64_t i = 0; i < n; ++i) {
    float q = nearbyintf(w[i] / s) + z;
    q = !(q >= 0.0f) ? 0.0f : (maxq < q ? maxq : q);
    w[i] = (q - z) * s;
  }
}

}  // namespace mo::formats
