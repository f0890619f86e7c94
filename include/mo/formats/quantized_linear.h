#pragma once
// One linear layer's weights as integer codes plus per-group scale and zero point — the common form
// every integer method (RTN, AWQ, GPTQ) produces and every on-disk layout (AWQ GEMM, GPTQ v1/v2)
// packs. W is [rows = out_features, cols = in_features] (PyTorch convention).
#include <cstdint>
#include <vector>

namespace mo::formats {

// group_size values with a meaning of their own, as HF quantization configs spell them.
inline constexpr int kGroupPerChannel = -1;  // one scale per output channel (a whole row)
inline constexpr int kGroupPerTensor = 0;    // one scale for the whole tensor (FP8 per-tensor)

struct QuantScheme {
  int bits = 4;          // 4 or 8
  int group_size = 128;  // input columns per scale, or kGroupPerChannel
  bool sym = false;      // symmetric: zero fixed at 2^(bits-1)
  bool per_channel() const { return group_size == kGroupPerChannel; }
  int groups(std::int64_t cols) const { return per_channel() ? 1 : static_cast<int>((cols + group_size - 1) / group_size); }
  int effective_group(std::int64_t cols) const { return per_channel() ? static_cast<int>(cols) : group_size; }
};

struct QuantizedLinear {
  std::int64_t rows = 0, cols = 0;
  QuantScheme scheme;
  std::vector<std::uint8_t> q;        // [rows, cols] codes in [0, 2^bits)
  std::vector<std::uint16_t> scales;  // [rows, n_groups] IEEE f16 bits (the precision the formats store)
  std::vector<std::uint8_t> zeros;    // [rows, n_groups] true zero point (symmetric: 2^(bits-1))
  std::vector<std::int32_t> g_idx;    // [cols] group of each input column (i / group_size unless act-order)
  int n_groups() const { return rows == 0 ? 0 : static_cast<int>(scales.size() / static_cast<std::size_t>(rows)); }
  // (q - zero) * scale in f32 — exact, since |q - zero| < 2^9 and the scale has an 11-bit mantissa.
  float weight(std::int64_t r, std::int64_t c) const;
  std::vector<float> dequantize() const;  // [rows, cols]
  // True when g_idx[c] == c / group_size for every column (no act-order permutation of groups).
  bool contiguous_groups() const;
};

}  // namespace mo::formats
