#include <cuda_runtime.h>

#include "mo/engine/ops/add.h"
#include "../check.cuh"

namespace mo::ops {
namespace {

// x, y: [n] f32. grid: (ceil(n / 256)), block: (256); one thread per element.
__global__ void add_inplace_kernel(float* __restrict__ x, const float* __restrict__ y, std::size_t n) {
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

}  // namespace

void add_inplace_cuda(float* x, const float* y, std::size_t n) {
  if (n == 0) return;
  constexpr unsigned kThreads = 256;
  unsigned blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  add_inplace_kernel<<<blocks, kThreads>>>(x, y, n);
  MO_CUDA_CHECK("add_inplace", cudaGetLastError());
}

}  // namespace mo::ops
