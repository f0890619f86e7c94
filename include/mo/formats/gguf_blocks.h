#pragma once
// On-disk GGUF quant blocks, byte for byte as llama.cpp's ggml/src/ggml-common.h (block_q4_0 ->
// BlockQ4_0, ...). The CPU quantizers, the dequantizer and the CUDA kernels all include this one
// header, so it stays plain: fixed-width integers only, f16 fields as raw uint16_t bits (convert with
// mo/core/half.h on the host, __ushort_as_half on the device), no constructors, nothing host-only.
// All fields are uint8_t/int8_t/uint16_t, so every block is 2-byte aligned and has no padding.
#include <cstdint>

namespace mo::formats {

constexpr int QK4_0 = 32;  // weights per block
constexpr int QK4_1 = 32;
constexpr int QK5_0 = 32;
constexpr int QK5_1 = 32;
constexpr int QK8_0 = 32;
constexpr int QK_K = 256;  // weights per k-quant super-block
constexpr int K_SCALE_SIZE = 12;

// w = (q - 8) * d; qs[j] holds weight j in the low nibble and weight j + 16 in the high nibble.
struct BlockQ4_0 {
  std::uint16_t d;  // f16 delta
  std::uint8_t qs[QK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 2 + QK4_0 / 2, "wrong q4_0 block size/padding");

// w = q * d + m; nibbles as Q4_0.
struct BlockQ4_1 {
  std::uint16_t d;  // f16 delta
  std::uint16_t m;  // f16 min
  std::uint8_t qs[QK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 2 * 2 + QK4_1 / 2, "wrong q4_1 block size/padding");

// w = (q - 16) * d; bit j of the little-endian u32 qh is bit 4 of weight j.
struct BlockQ5_0 {
  std::uint16_t d;  // f16 delta
  std::uint8_t qh[4];
  std::uint8_t qs[QK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 2 + 4 + QK5_0 / 2, "wrong q5_0 block size/padding");

// w = q * d + m; 5-bit q as Q5_0.
struct BlockQ5_1 {
  std::uint16_t d;  // f16 delta
  std::uint16_t m;  // f16 min
  std::uint8_t qh[4];
  std::uint8_t qs[QK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 2 * 2 + 4 + QK5_1 / 2, "wrong q5_1 block size/padding");

// w = q * d.
struct BlockQ8_0 {
  std::uint16_t d;  // f16 delta
  std::int8_t qs[QK8_0];
};
static_assert(sizeof(BlockQ8_0) == 2 + QK8_0, "wrong q8_0 block size/padding");

// 16 sub-blocks of 16: w = d * (sc & 0xF) * q - dmin * (sc >> 4), 2-bit q. 2.625 bits per weight.
struct BlockQ2_K {
  std::uint8_t scales[QK_K / 16];  // 4-bit scale (low nibble) and 4-bit min (high nibble)
  std::uint8_t qs[QK_K / 4];       // per 128 weights: 32 bytes, weight l + 32*k at bits 2k
  std::uint16_t d;                 // f16 super-block scale for the scales
  std::uint16_t dmin;              // f16 super-block scale for the mins
};
static_assert(sizeof(BlockQ2_K) == 2 * 2 + QK_K / 16 + QK_K / 4, "wrong q2_K block size/padding");

// 16 sub-blocks of 16: w = d * (sc - 32) * (q - (hmask bit ? 0 : 4)), 6-bit signed scales.
// 3.4375 bits per weight.
struct BlockQ3_K {
  std::uint8_t hmask[QK_K / 8];  // high bit of q; bit k of byte l covers weight 32*k + l
  std::uint8_t qs[QK_K / 4];     // low 2 bits, laid out as Q2_K
  std::uint8_t scales[12];       // 16 six-bit scales
  std::uint16_t d;               // f16 super-block scale
};
static_assert(sizeof(BlockQ3_K) == 2 + QK_K / 4 + QK_K / 8 + 12, "wrong q3_K block size/padding");

// 8 sub-blocks of 32: w = d * sc * q - dmin * m, 6-bit sc and m. 4.5 bits per weight.
struct BlockQ4_K {
  std::uint16_t d;                    // f16 super-block scale for the scales
  std::uint16_t dmin;                 // f16 super-block scale for the mins
  std::uint8_t scales[K_SCALE_SIZE];  // 8 scales and 8 mins, 6 bits each
  std::uint8_t qs[QK_K / 2];          // per 64 weights: 32 bytes, weight l low nibble, l + 32 high
};
static_assert(sizeof(BlockQ4_K) == 2 * 2 + K_SCALE_SIZE + QK_K / 2, "wrong q4_K block size/padding");

// As Q4_K with a fifth bit per weight. 5.5 bits per weight.
struct BlockQ5_K {
  std::uint16_t d;                    // f16 super-block scale for the scales
  std::uint16_t dmin;                 // f16 super-block scale for the mins
  std::uint8_t scales[K_SCALE_SIZE];  // as Q4_K
  std::uint8_t qh[QK_K / 8];          // bit 2c (low nibble) / 2c+1 (high nibble) of byte l, chunk c
  std::uint8_t qs[QK_K / 2];          // low 4 bits, laid out as Q4_K
};
static_assert(sizeof(BlockQ5_K) == 2 * 2 + K_SCALE_SIZE + QK_K / 2 + QK_K / 8, "wrong q5_K block size/padding");

// 16 sub-blocks of 16: w = d * sc * (q - 32), 6-bit q, int8 scales. 6.5625 bits per weight.
struct BlockQ6_K {
  std::uint8_t ql[QK_K / 2];      // low 4 bits
  std::uint8_t qh[QK_K / 4];      // high 2 bits
  std::int8_t scales[QK_K / 16];  // 8-bit scales
  std::uint16_t d;                // f16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 2 + QK_K / 16 + 3 * QK_K / 4, "wrong q6_K block size/padding");

}  // namespace mo::formats
