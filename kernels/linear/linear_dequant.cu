// The batched (n > 8) path's first half: weights dequantized to f16 and activations rounded to f16,
// for the cuBLAS GEMM in linear_runner.cu. Also the sum of the split-K partials of the packed GEMVs.
#include <algorithm>

#include "linear_kernels.cuh"

namespace mo::engine::cuda_dev::lin {
namespace {

constexpr int kThreads = 256;

// Grid-stride over the capped grid the launchers pick.
int grid_for(std::int64_t count) { return static_cast<int>(std::min<std::int64_t>((count + kThreads - 1) / kThreads, 65536)); }

// grid: min(ceil(rows*cols/256), 65536) blocks of 256 threads, grid-stride; thread i writes W[i / cols, i % cols]
// (k fastest, so the f16 writes are coalesced; the packed reads are shared by neighbours through L1/L2).
__global__ void __launch_bounds__(kThreads) dequant_kernel(Args a, __half* __restrict__ w) {
  const std::int64_t total = a.rows * a.cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    w[i] = __float2half_rn(weight_at(a, i / a.cols, i % a.cols));
}

// grid: min(ceil(count/256), 65536) blocks of 256 threads, grid-stride over the elements.
__global__ void __launch_bounds__(kThreads) to_f16_kernel(const float* __restrict__ x, std::int64_t count, __half* __restrict__ out) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2half_rn(x[i]);
}

// grid: min(ceil(count/256), 65536) blocks of 256 threads, grid-stride; y[i] = Σ_s partial[s*count + i] in
// slice order (deterministic, no atomics).
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(const float* __restrict__ partial, std::int64_t slices, std::int64_t count, float* __restrict__ y) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (std::int64_t k = 0; k < slices; ++k) s += partial[k * count + i];
    y[i] = s;
  }
}

}  // namespace

void dequantize_f16(const Args& a, __half* w) {
  dequant_kernel<<<grid_for(a.rows * a.cols), kThreads>>>(a, w);
  MO_CUDA_CHECK("linear dequantize to f16", cudaGetLastError());
}

void to_f16(const float* x, std::int64_t count, __half* out) {
  if (count == 0) return;
  to_f16_kernel<<<grid_for(count), kThreads>>>(x, count, out);
  MO_CUDA_CHECK("linear activations to f16", cudaGetLastError());
}

void reduce_partials(const float* partial, std::int64_t slices, std::int64_t count, float* y) {
  reduce_kernel<<<grid_for(count), kThreads>>>(partial, slices, count, y);
  MO_CUDA_CHECK("linear split-K reduce", cudaGetLastError());
}

}  // namespace mo::engine::cuda_dev::lin
