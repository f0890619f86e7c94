#pragma once
// y = x · Wᵀ for a weight matrix in any stored format: the one entry point the model math uses for
// every linear layer. CPU: F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K and Q6_K rows are decoded block by
// block in registers and dotted with up to 8 tokens per pass over the row (src/engine/cpu/qdot_*.cpp,
// at the SimdLevel below); other types are decoded a row at a time into a thread-local buffer. Either
// way memory stays at the file size, activations stay f32, and a token's result does not depend on
// the other tokens in the call.
#include <cstdint>
#include <span>

#include "mo/core/thread_pool.h"
#include "mo/engine/weights.h"

namespace mo::ops {

// x: [n, w.cols] f32, y: [n, w.rows] f32 (overwritten).
void linear(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool);

// Several matrices with the same input (q/k/v; gate/up) in one call: ys[i] = x · ws[i]ᵀ, bit-identical
// to separate linear() calls.
void linear_multi(const float* x, std::int64_t n, std::span<const engine::Matrix* const> ws, std::span<float* const> ys, ThreadPool& pool);

// Batch GEMM through BLAS (cblas_sgemm) for F32 weights when a call has at least 16 tokens: ~4x the
// throughput of the row kernels on calibration-sized batches, but a token's result may then depend on
// the batch it came in, so only whole-dataset passes (quantize, calibration) turn it on.
void set_blas_for_batches(bool on);
bool blas_for_batches();

// One row of an embedding-style matrix (row `r` of w) decoded into out[0, w.cols).
void matrix_row(const engine::Matrix& w, std::int64_t r, float* out);

// Dot product of two f32 vectors with the fastest kernel this CPU has (AVX-512, AVX2 or scalar).
float dot_f32(const float* a, const float* b, std::int64_t n);

// Which kernels dot_f32 and linear use; tests force `scalar` to compare against the SIMD paths.
enum class SimdLevel { scalar, avx2, avx512 };
SimdLevel simd_level();
void set_simd_level(SimdLevel level);  // clamped to what the CPU supports
const char* simd_level_name(SimdLevel level);

}  // namespace mo::ops
