#include "mo/formats/fp8.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>

#include "mo/core/error.h"

namespace mo::formats {
namespace {

constexpr float kE4m3Max = 448.0f;

}  // namespace

std::uint8_t f32_to_e4m3(float v) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(v);
  const std::uint8_t sign = static_cast<std::uint8_t>((x >> 24) & 0x80);
  if (std::isnan(v)) return sign | 0x7F;
  // Saturate like compressed-tensors (clamp to finfo(float8_e4m3fn).max before the cast): infinities too.
  const float a = std::fmin(std::fabs(v), kE4m3Max);
  const std::uint32_t abs = std::bit_cast<std::uint32_t>(a);
  if (abs < 0x3C800000u) {
    // Below 2^-6 the format is subnormal, a multiple of 2^-9: a * 512 is exact, nearbyint rounds half to even.
    return sign | static_cast<std::uint8_t>(std::nearbyint(a * 512.0f));  // 8 -> 0x08, the smallest normal
  }
  // Normal: keep 3 of the 23 mantissa bits, round half to even; a carry moves into the exponent.
  std::uint32_t r = abs - ((127u - 7u) << 23);  // rebias the exponent 127 -> 7
  r = (r + 0x7FFFF + ((r >> 20) & 1)) >> 20;
  return sign | static_cast<std::uint8_t>(r);
}

float e4m3_to_f32(std::uint8_t v) {
  const float sign = (v & 0x80) ? -1.0f : 1.0f;
  const int exp = (v >> 3) & 0xF, man = v & 7;
  if (exp == 15 && man == 7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -9);
  return sign * std::ldexp(static_cast<float>(8 + man), exp - 10);
}

std::vector<float> Fp8Linear::dequantize() const {
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float s = scales[per_channel ? r : 0];
    for (std::int64_t c = 0; c < cols; ++c) w[r * cols + c] = e4m3_to_f32(q[r * cols + c]) * s;
  }
  return w;
}

Fp8Linear quantize_fp8(const float* w, std::int64_t rows, std::int64_t cols, bool per_channel) {
  if (rows <= 0 || cols <= 0) throw Error(fmt::format("FP8 quantize: empty matrix {}x{}", rows, cols));
  Fp8Linear f;
  f.rows = rows, f.cols = cols, f.per_channel = per_channel;
  f.q.resize(static_cast<std::size_t>(rows * cols));
  auto absmax = [&](std::int64_t r0, std::int64_t r1) {
    float m = 0.0f;
    for (std::int64_t i = r0 * cols; i < r1 * cols; ++i) {
      if (!std::isfinite(w[i])) throw Error(fmt::format("FP8 quantize: non-finite weight at row {}, column {}", i / cols, i % cols));
      m = std::fmax(m, std::fabs(w[i]));
    }
    // An all-zero row gets scale 1 so the stored scale stays a usable divisor; its codes are all 0 anyway.
    return m > 0.0f ? m / kE4m3Max : 1.0f;
  };
  if (per_channel)
    for (std::int64_t r = 0; r < rows; ++r) f.scales.push_back(absmax(r, r + 1));
  else
    f.scales.push_back(absmax(0, rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float s = f.scales[per_channel ? r : 0];
    for (std::int64_t c = 0; c < cols; ++c) f.q[r * cols + c] = f32_to_e4m3(w[r * cols + c] / s);
  }
  return f;
}

}  // namespace mo::formats
