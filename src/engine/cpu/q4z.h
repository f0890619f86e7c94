#pragma once
// Q4Z: the engine-internal 4-bit block type AWQ and GPTQ INT4 linears load into (Matrix::type
// engine::kQ4zType). Each row is cols / 32 blocks of {f16 scale, zero, 32 nibbles}: the checkpoint's
// stored scale (bit for bit) and true zero of the block's group, so weight = (q - zero) * scale
// exactly, and a dot with a BlockQ8 row is Σ (q - zero)·x_q in integers times scale·d.
#include <cstddef>
#include <cstdint>

#include "mo/core/thread_pool.h"
#include "mo/engine/weights.h"
#include "q8.h"

namespace mo::ops::q4z {

// Nibbles as ggml's q4_0: qs[j] & 15 is input j, qs[j] >> 4 is input j + 16.
struct BlockQ4Z {
  std::uint16_t d;  // f16 bits of the group's stored scale
  std::uint8_t z;   // true zero point, 0..16 (GPTQ v1's stored zero + 1 can reach 16)
  std::uint8_t qs[16];
} __attribute__((packed));
static_assert(sizeof(BlockQ4Z) == 19);

inline std::size_t row_bytes(std::int64_t cols) { return static_cast<std::size_t>(cols / q8::kBlock) * sizeof(BlockQ4Z); }

// One row of `cols` weights (in the row's stored column order) to f32: (q - z) * scale, exact.
void dequantize_row(const std::uint8_t* row, float* out, std::int64_t cols);

// Row r of w in the original input order (undoing Matrix::in_perm).
void matrix_row(const engine::Matrix& w, std::int64_t r, float* out);

// y = x · Wᵀ: x gathered by in_perm when set, quantized to BlockQ8 once, rows split over the pool.
void linear(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool);

// The tile kernels (q8.h contract) per level; nullptr when the level is missing on this CPU.
q8::Kernel kernel_scalar();
q8::Kernel kernel_avx2();
q8::Kernel kernel_avx512();  // 256-bit VNNI (avx512vl + avx512vnni)

}  // namespace mo::ops::q4z

namespace mo::ops::q8 {
// The Q4Z kernel at `level` (best available at or below it), or nullptr for other types.
Kernel kernel_q4z(std::uint32_t type, SimdLevel level);
}  // namespace mo::ops::q8
