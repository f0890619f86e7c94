#pragma once
// FP8 E4M3 (the "e4m3fn" variant: no infinities, max 448, NaN = 0x7F/0xFF) weights with f32 scales
// per output channel or per tensor: w ~= fp8(w / scale) * scale, scale = absmax / 448.
#include <cstdint>
#include <vector>

namespace mo::formats {

std::uint8_t f32_to_e4m3(float v);  // round to nearest even, saturating to +-448
float e4m3_to_f32(std::uint8_t v);

struct Fp8Linear {
  std::int64_t rows = 0, cols = 0;
  bool per_channel = true;
  std::vector<std::uint8_t> q;            // [rows, cols] E4M3
  std::vector<float> scales;              // [rows] per channel, or [1]
  std::vector<float> dequantize() const;  // e4m3_to_f32(q) * scale, in f32
};

Fp8Linear quantize_fp8(const float* w, std::int64_t rows, std::int64_t cols, bool per_channel);

}  // namespace mo::formats
