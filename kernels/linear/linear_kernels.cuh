#pragma once
// Host launchers of the linear kernels (linear_rowwise.cu, linear_packed.cu, linear_dequant.cu), called
// by the LinearRunner (linear_runner.cu), which picks the path and owns the scratch buffers.
#include <cstdint>

#include "linear_common.cuh"

namespace mo::engine::cuda_dev::lin {

// f16 / q8_0 / q4_k / q6_k, 1 <= n <= 8: y[n, rows] (rows of W contiguous along K).
bool rowwise_gemv_supported(const Args& a);  // alignment the vector loads need
void rowwise_gemv(const Args& a, const float* x, int n, float* y);

// awq / gptq, 1 <= n <= 8: split-K over `ksplit` blocks, each writing its own slice of partial
// [ksplit, n, rows] (y itself when ksplit == 1); reduce_partials then sums the slices into y.
struct PackedPlan {
  int vec = 1;              // packed words per thread (awq) / outputs per thread (gptq, always 4)
  std::int64_t tiles = 0;   // blocks along the outputs
  std::int64_t kb = 0;      // inputs per block (multiple of 64)
  std::int64_t ksplit = 1;  // blocks along K
};
bool packed_gemv_plan(const Args& a, int n, int sm_count, PackedPlan& plan);  // false: alignment rules out the kernel
void packed_gemv(const Args& a, const float* x, int n, const PackedPlan& plan, float* out);
void reduce_partials(const float* partial, std::int64_t slices, std::int64_t count, float* y);

// W as f16 [rows, cols] row-major (any kind but f16), and f32 -> f16 for activations.
void dequantize_f16(const Args& a, __half* w);
void to_f16(const float* x, std::int64_t count, __half* out);

}  // namespace mo::engine::cuda_dev::lin
