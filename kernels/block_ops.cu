// The elementwise and per-row ops of the Llama block on the GPU (contracts in backend.h). Elementwise
// kernels use grid-stride loops over 64-bit indices, so any n fits a bounded grid.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "check.cuh"
#include "cuda_ops.h"

namespace mo::engine::cuda_dev {
namespace {

constexpr int kThreads = 256;

// Enough blocks to fill the GPU; the grid-stride loops cover the rest.
unsigned grid_for(std::int64_t n) { return static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65536)); }

__device__ __forceinline__ std::int64_t first_index() { return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

__global__ void embedding_kernel(const std::uint16_t* table, std::int64_t dim, const std::int32_t* tokens, std::int64_t total, float* out) {
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t t = i / dim, j = i % dim;
    out[i] = __half2float(__ushort_as_half(table[static_cast<std::int64_t>(tokens[t]) * dim + j]));
  }
}

// One block per row. The mean square is accumulated in double (as the CPU engine does): rows of 8k
// values lose digits in f32, and d double FMAs per row cost nothing next to the row's memory traffic.
__global__ void rms_norm_kernel(const float* x, const float* w, float* out, std::int64_t d, float eps) {
  const float* xr = x + static_cast<std::int64_t>(blockIdx.x) * d;
  float* orow = out + static_cast<std::int64_t>(blockIdx.x) * d;  // may alias xr: each thread rewrites only what it read
  double ss = 0;
  for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += static_cast<double>(xr[i]) * xr[i];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ double part[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) part[warp] = ss;
  __syncthreads();
  double total = 0;
  for (int k = 0; k < kThreads / 32; ++k) total += part[k];  // every thread, same order: same value
  const float scale = static_cast<float>(1.0 / sqrt(total / static_cast<double>(d) + static_cast<double>(eps)));
  for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) orow[i] = __fmul_rn(__fmul_rn(xr[i], scale), w[i]);
}

// One thread per (token, pair): the angle (in double, as the CPU engine) is computed once and applied to
// every head. Products are rounded separately (no FMA contraction) to match the CPU's f32 rotation.
__global__ void rope_kernel(float* x, const std::int32_t* pos, std::int64_t n, int heads, int head_dim, float theta, float freq_scale,
                            const float* factors, bool neox) {
  const int half = head_dim / 2;
  for (std::int64_t idx = first_index(); idx < n * half; idx += grid_stride()) {
    const std::int64_t t = idx / half;
    const int i = static_cast<int>(idx % half);
    double angle = static_cast<double>(pos[t]) * static_cast<double>(freq_scale) * pow(static_cast<double>(theta), -2.0 * i / head_dim);
    if (factors) angle /= static_cast<double>(factors[i]);
    double sd, cd;
    sincos(angle, &sd, &cd);
    const float c = static_cast<float>(cd), s = static_cast<float>(sd);
    const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    for (int h = 0; h < heads; ++h) {
      float* xh = x + (t * heads + h) * head_dim;
      const float x0 = xh[a], x1 = xh[b];
      xh[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
      xh[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
    }
  }
}

__global__ void silu_mul_kernel(float* gate, const float* up, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void add_kernel(float* x, const float* y, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) x[i] += y[i];
}

__global__ void add_bias_kernel(float* y, const float* bias, std::int64_t total, std::int64_t d) {
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) y[i] += bias[i % d];
}

__global__ void scale_columns_kernel(float* y, const float* s, std::int64_t total, std::int64_t d) {
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) y[i] *= s[i % d];
}

// One block per row i: max and sum over columns 0..i (shared-memory reductions), then normalize; zeros after.
__global__ void causal_softmax_kernel(float* s, std::int64_t n, std::int64_t ld) {
  __shared__ float red[kThreads];
  const std::int64_t i = blockIdx.x;
  float* row = s + i * ld;
  const int tid = static_cast<int>(threadIdx.x);
  float m = -INFINITY;
  for (std::int64_t j = tid; j <= i; j += blockDim.x) m = fmaxf(m, row[j]);
  red[tid] = m;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (tid < w) red[tid] = fmaxf(red[tid], red[tid + w]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.0f;
  for (std::int64_t j = tid; j <= i; j += blockDim.x) {
    const float e = expf(row[j] - m);
    row[j] = e;
    sum += e;
  }
  red[tid] = sum;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (tid < w) red[tid] += red[tid + w];
    __syncthreads();
  }
  const float inv = 1.0f / red[0];
  for (std::int64_t j = tid; j < n; j += blockDim.x) row[j] = j <= i ? row[j] * inv : 0.0f;
}

// One thread per element of the [n, row] K and V inputs; token t goes to row slots[t] of the caches.
__global__ void kv_write_kernel(std::uint16_t* k_cache, std::uint16_t* v_cache, const float* k, const float* v, const std::int32_t* slots,
                                std::int64_t total, std::int64_t row) {
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t t = i / row, j = i % row;
    const std::int64_t dst = static_cast<std::int64_t>(slots[t]) * row + j;
    k_cache[dst] = __half_as_ushort(__float2half_rn(k[i]));
    v_cache[dst] = __half_as_ushort(__float2half_rn(v[i]));
  }
}

}  // namespace

void embedding(const std::uint16_t* table, std::int64_t dim, const std::int32_t* tokens, std::int64_t n, float* out) {
  if (n <= 0 || dim <= 0) return;
  embedding_kernel<<<grid_for(n * dim), kThreads>>>(table, dim, tokens, n * dim, out);
  MO_CUDA_CHECK("embedding", cudaGetLastError());
}

void rms_norm(const float* x, const float* w, float* out, std::int64_t n, std::int64_t d, float eps) {
  if (n <= 0 || d <= 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(n), kThreads>>>(x, w, out, d, eps);
  MO_CUDA_CHECK("rms_norm", cudaGetLastError());
}

void rope(float* x, const std::int32_t* pos, std::int64_t n, std::int64_t heads, std::int64_t head_dim, float theta, float freq_scale,
          const float* factors, RopeStyle style) {
  if (n <= 0 || heads <= 0 || head_dim < 2) return;
  rope_kernel<<<grid_for(n * (head_dim / 2)), kThreads>>>(x, pos, n, static_cast<int>(heads), static_cast<int>(head_dim), theta, freq_scale,
                                                          factors, style == RopeStyle::neox);
  MO_CUDA_CHECK("rope", cudaGetLastError());
}

void silu_mul(float* gate, const float* up, std::int64_t n) {
  if (n <= 0) return;
  silu_mul_kernel<<<grid_for(n), kThreads>>>(gate, up, n);
  MO_CUDA_CHECK("silu_mul", cudaGetLastError());
}

void add(float* x, const float* y, std::int64_t n) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n), kThreads>>>(x, y, n);
  MO_CUDA_CHECK("add", cudaGetLastError());
}

void add_bias(float* y, const float* bias, std::int64_t n, std::int64_t d) {
  if (n <= 0 || d <= 0) return;
  add_bias_kernel<<<grid_for(n * d), kThreads>>>(y, bias, n * d, d);
  MO_CUDA_CHECK("add_bias", cudaGetLastError());
}

void scale_columns(float* y, const float* s, std::int64_t n, std::int64_t d) {
  if (n <= 0 || d <= 0) return;
  scale_columns_kernel<<<grid_for(n * d), kThreads>>>(y, s, n * d, d);
  MO_CUDA_CHECK("scale_columns", cudaGetLastError());
}

void causal_softmax(float* s, std::int64_t n, std::int64_t ld) {
  if (n <= 0) return;
  causal_softmax_kernel<<<static_cast<unsigned>(n), kThreads>>>(s, n, ld);
  MO_CUDA_CHECK("causal_softmax", cudaGetLastError());
}

void kv_write(std::uint16_t* k_cache, std::uint16_t* v_cache, const float* k, const float* v, const std::int32_t* slots, std::int64_t n,
              std::int64_t row) {
  if (n <= 0 || row <= 0) return;
  kv_write_kernel<<<grid_for(n * row), kThreads>>>(k_cache, v_cache, k, v, slots, n * row, row);
  MO_CUDA_CHECK("kv_write", cudaGetLastError());
}

}  // namespace mo::engine::cuda_dev
