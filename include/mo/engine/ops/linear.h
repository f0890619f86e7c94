#pragma once
// y = x · Wᵀ for a weight matrix in any stored format: the one entry point the model math uses for
// every linear layer. CPU: F32, F16 and BF16 go through register-blocked tiles of weight rows × tokens
// (src/engine/cpu/ftile*.cpp); Q4_0, Q4_1, Q8_0, Q4_K and Q6_K rows are decoded block by
// block in registers and dotted with up to 8 tokens per pass over the row (src/engine/cpu/qdot_*.cpp,
// at the SimdLevel below); other types are decoded a row at a time into a thread-local buffer. Either
// way memory stays at the file size, activations stay f32, and a token's result does not depend on
// the other tokens in the call.
#include <cstdint>
#include <span>

#include "mo/core/thread_pool.h"
#include "mo/engine/weights.h"

namespace mo::ops {

// How a call of many tokens may be computed.
enum class Batching {
  invariant,  // a token's result never depends on the other tokens in the call
  // F32 weights with at least 16 tokens go through BLAS (cblas_sgemm): ~4x the throughput of the row
  // kernels on calibration-sized batches, but a token's result may then depend on the batch it came in,
  // so only whole-dataset passes (quantize, calibration) ask for it.
  blas,
};

// x: [n, w.cols] f32, y: [n, w.rows] f32 (overwritten). Quantized GGUF weights (Q4_0 ... Q6_K) take
// integer dot products: x is quantized once per call to 8-bit blocks of 32 (as llama.cpp's q8_0) and
// each row is dotted with it in integers (src/engine/cpu/q8.h), bit-identical whatever the batch.
void linear(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool, Batching batching = Batching::invariant);

// Several matrices with the same input (q/k/v, gate/up) in one call: x is quantized once and all their
// output rows are split across the threads together. ys[i]: [n, ws[i]->rows]. Bit for bit the same as
// separate linear calls (which it makes when the matrices cannot share the integer path).
void linear_multi(const float* x, std::int64_t n, std::span<const engine::Matrix* const> ws, std::span<float* const> ys, ThreadPool& pool,
                  Batching batching = Batching::invariant);

// Quantized weights (GGUF block types, AWQ/GPTQ INT4) take integer dot products with 8-bit activations
// (on by default, as llama.cpp). Off: f32 activations against the exactly decoded weights (slower), for
// references that must see the stored weights alone. MO_INT_DOT=0 in the environment starts it off.
void set_int_dot(bool on);
bool int_dot();

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
