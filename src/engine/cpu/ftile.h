#pragma once
// Register-blocked matrix-matrix kernels for ops::linear on float weights (F32, F16, BF16) with f32
// activations. One micro-kernel computes an MR×NR tile (MR weight rows × NR tokens) with one vector
// accumulator per (row, token) over K lanes, walked in the same K order with explicit FMAs and reduced
// the same way at the end, whatever the tile shape: a (row, token) result is bit-identical for any
// number of tokens in the call and any row range a thread gets (batch invariance). For F16/BF16 weights
// the activations are rounded to the weights' type first (round to nearest even), as llama.cpp does
// and as 16-bit checkpoints run in Transformers/vLLM; so w·x is exact per product and only the f32 sums
// round. Results match across SIMD levels only to f32 rounding.
#include <cstddef>
#include <cstdint>

#include "mo/core/thread_pool.h"
#include "mo/engine/ops/linear.h"
#include "mo/engine/weights.h"

namespace mo::ops::ftile {

// A float weight matrix as the kernels see it: row r is `cols` values of ggml `type` at data + r * row_bytes.
struct Weights {
  std::uint32_t type = 0;  // 0 = F32, 1 = F16, 30 = BF16
  const std::uint8_t* data = nullptr;
  std::size_t row_bytes = 0;
  std::int64_t cols = 0;
};

// y[t * y_stride + r] = Σ_k w[r][k] · x[t * x_stride + k] for r in [r0, r1), t in [0, n).
using RowRange = void (*)(const Weights& w, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t x_stride, std::int64_t n,
                          float* y, std::int64_t y_stride);

// The same for F16 / BF16 weights on activations already rounded to the weights' type (round_to_type):
// what ops::linear calls, so that x is rounded once per call rather than once per row range.
using RowRange16 = void (*)(const Weights& w, std::int64_t r0, std::int64_t r1, const std::uint16_t* x, std::int64_t x_stride,
                            std::int64_t n, float* y, std::int64_t y_stride);

// F32, F16 or BF16.
bool supports(std::uint32_t type);

// The kernel for `type` at `level` (nullptr when unsupported there); kernel16: for F16 / BF16 only.
RowRange kernel(std::uint32_t type, SimdLevel level);
RowRange kernel_scalar(std::uint32_t type);
RowRange kernel_avx2(std::uint32_t type);
RowRange kernel_avx512(std::uint32_t type);
RowRange16 kernel16(std::uint32_t type, SimdLevel level);
RowRange16 kernel16_scalar(std::uint32_t type);
RowRange16 kernel16_avx2(std::uint32_t type);
RowRange16 kernel16_avx512(std::uint32_t type);

// n values rounded to F16 (type 1) or BF16 (30), to nearest even: mo::f32_to_f16 / f32_to_bf16 bit for
// bit, whichever SIMD level does it.
void round_to_type(std::uint32_t type, const float* x, std::int64_t n, std::uint16_t* out);
void round_to_type_avx2(std::uint32_t type, const float* x, std::int64_t n, std::uint16_t* out);

// ops::linear for a supported type: rows shared among the pool's threads, at simd_level().
void linear(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool);

// Off: ops::linear sends float types back to the qdot row kernels (for old-vs-new benchmarks).
// Default on; MO_FTILE=0 in the environment starts it off.
void set_enabled(bool on);
bool enabled();

}  // namespace mo::ops::ftile
