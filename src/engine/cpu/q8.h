#pragma once
// Integer-dot kernels for ops::linear on quantized weights: each activation row is quantized once per
// linear call to 8-bit blocks of 32 (BlockQ8, like ggml's q8_0 with the block sums of q8_1/q8_K), and
// every quantized weight type is dotted with it in integer arithmetic (AVX2 maddubs, AVX512-VNNI dpbusd),
// one f32 multiply-add per (weight block, activation block). One kernel serves every token count (a
// register-blocked tile of weight rows x tokens), so a token's result never depends on the batch.
#include <cstddef>
#include <cstdint>

#include "mo/engine/ops/linear.h"

namespace mo::ops::q8 {

inline constexpr int kBlock = 32;

struct BlockQ8 {
  float d;                 // x[i] ~= d * qs[i]; d = amax / 127 (0 for an all-zero block)
  std::int16_t sum[2];     // sum of qs[0..15] and of qs[16..31] (for weight formats with offsets or mins)
  std::int8_t qs[kBlock];  // round-to-nearest of x[i] / d
};
static_assert(sizeof(BlockQ8) == 40);

// x: [n, cols] f32 with rows x_stride apart, cols % 32 == 0 -> out: n rows of cols / 32 blocks, row t at
// out + t * (cols / 32). The same x row always gives the same blocks (no dependence on n).
void quantize_rows(const float* x, std::int64_t n, std::int64_t cols, std::int64_t x_stride, BlockQ8* out);

// y[t * y_stride + r] = sum_i W[r][i] * x_t[i] for r in [0, nr), t in [0, nt), where W row r starts at
// w + r * row_bytes and x_t = xq + t * (cols / 32). Any nr >= 1 and nt >= 1; the value of one (r, t)
// must be bit-identical whatever nr and nt are (same operations in the same order for every tile
// shape and tail).
using Kernel = void (*)(const std::uint8_t* w, std::size_t row_bytes, int nr, const BlockQ8* xq, int nt, std::int64_t cols, float* y,
                        std::int64_t y_stride);

// The kernel for ggml type `type` (or an engine-internal packed type, see weights.h) at `level`, or
// nullptr when there is none (the caller then uses the f32 path).
Kernel kernel(std::uint32_t type, SimdLevel level);

}  // namespace mo::ops::q8
