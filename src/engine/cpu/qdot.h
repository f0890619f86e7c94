#pragma once
// Fused dequantize-and-dot kernels for ops::linear: each decodes one weight row block by block in
// registers (never the whole row to memory) and dots it with up to kMaxTokens tokens at once, so a
// row's bytes are read once per token group. Weights are decoded bit-exactly as mo::gguf's
// dequantize_row; only the order of the additions differs between levels.
#include <cstdint>

#include "mo/engine/ops/linear.h"

namespace mo::ops::qdot {

// Tokens per weight-row pass. AVX-512 keeps 8 tokens' accumulators in registers; AVX2 has half the
// registers and splits a group of more than 4 into two passes over the (then L1-resident) row.
constexpr int kMaxTokens = 8;

// y[t * y_stride] = Σ_i w[i] · x[t * x_stride + i] for t in [0, nt), nt in [1, kMaxTokens];
// row: `cols` weights of the kernel's ggml type (cols a multiple of its block size).
using RowDot = void (*)(const std::uint8_t* row, std::int64_t cols, const float* x, std::int64_t x_stride, int nt, float* y,
                        std::int64_t y_stride);

// The kernel for ggml `type` at `level`, or nullptr when that level has none for the type.
// scalar: F32, F16, BF16 and every block type mo::gguf can dequantize; avx2, avx512: F32, F16, BF16,
// Q4_0, Q4_1, Q8_0, Q4_K, Q6_K.
RowDot row_dot(std::uint32_t type, SimdLevel level);

RowDot row_dot_scalar(std::uint32_t type);
RowDot row_dot_avx2(std::uint32_t type);
RowDot row_dot_avx512(std::uint32_t type);

}  // namespace mo::ops::qdot
