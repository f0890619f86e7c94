#pragma once
// Fused GEMV kernels (1 <= n <= 8 tokens) for the layouts whose output rows are contiguous along K:
// f16, q8_0, q4_k, q6_k. A warp owns two output rows and walks them in "units" (8 f16 / 16 q8_0 /
// 32 q4_k / 16 q6_k weights per lane per step); each weight is decoded once and used for all N tokens.
// The kernel template lives here; each layout is instantiated (8 token counts) in a file of its own
// (linear_rowwise_<layout>.cu) so no translation unit compiles all 40 kernels.
#include <algorithm>

#include "linear_kernels.cuh"

namespace mo::engine::cuda_dev::lin {

// One layout's kernel for 1 <= n <= 8 tokens, y[n, rows] (linear_rowwise_<layout>.cu).
void rowwise_f16_vec(const Args& a, const float* x, int n, float* y);
void rowwise_f16_scalar(const Args& a, const float* x, int n, float* y);
void rowwise_q8_0(const Args& a, const float* x, int n, float* y);
void rowwise_q4_k(const Args& a, const float* x, int n, float* y);
void rowwise_q6_k(const Args& a, const float* x, int n, float* y);

namespace rowwise_detail {

constexpr int kWarps = 8, kRowsPerWarp = 2, kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kChunk = 1024;  // inputs of x staged in shared memory per step (a multiple of every unit and of 256)

// x[t][i] * w summed into acc[t] for the N tokens (x in shared memory, chunk stride kChunk).
template <int N>
__device__ __forceinline__ void fma_tokens(float (&acc)[N], float w, const float* xs, int i) {
#pragma unroll
  for (int t = 0; t < N; ++t) acc[t] = fmaf(w, xs[t * kChunk + i], acc[t]);
}

// f16, 8 weights per unit through one 128-bit load (needs cols % 8 == 0 and a 16-byte aligned W).
struct F16Vec {
  static constexpr int kUnit = 8;
  template <int N>
  __device__ static void dot(const Args&, const std::uint8_t* row, std::int64_t k0, int u, const float* xs, float (&acc)[N]) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(row) + (k0 / 8 + u));
    const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      fma_tokens<N>(acc, h2f(static_cast<std::uint16_t>(words[j] & 0xFFFF)), xs, 8 * u + 2 * j);
      fma_tokens<N>(acc, h2f(static_cast<std::uint16_t>(words[j] >> 16)), xs, 8 * u + 2 * j + 1);
    }
  }
};

// f16, one weight per unit: any cols and 2-byte alignment.
struct F16Scalar {
  static constexpr int kUnit = 1;
  template <int N>
  __device__ static void dot(const Args&, const std::uint8_t* row, std::int64_t k0, int u, const float* xs, float (&acc)[N]) {
    fma_tokens<N>(acc, h2f(__ldg(reinterpret_cast<const std::uint16_t*>(row) + k0 + u)), xs, u);
  }
};

// Q8_0: half a 34-byte block (16 int8) per unit, through 16-bit loads (blocks are only 2-byte aligned).
struct Q8_0 {
  static constexpr int kUnit = 16;
  template <int N>
  __device__ static void dot(const Args&, const std::uint8_t* row, std::int64_t k0, int u, const float* xs, float (&acc)[N]) {
    const std::uint8_t* b = row + (k0 / 32 + u / 2) * 34;
    const float d = h2f(__ldg(reinterpret_cast<const std::uint16_t*>(b)));
    const std::uint16_t* q = reinterpret_cast<const std::uint16_t*>(b + 2 + 16 * (u & 1));
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const std::uint16_t v = __ldg(q + j);
      // int8 -> float exactly: magic(q + 128) - magic(128), then * d as gguf_dequant.cpp does.
      const float q0 = magic((v & 0xFFu) ^ 0x80u) - magic(128), q1 = magic((v >> 8) ^ 0x80u) - magic(128);
      fma_tokens<N>(acc, q0 * d, xs, 16 * u + 2 * j);
      fma_tokens<N>(acc, q1 * d, xs, 16 * u + 2 * j + 1);
    }
  }
};

// The 12 scale bytes of a Q4_K block as three words, with formats::scale_min_k4's indexing (no local array: j is
// not a compile-time constant, and an indexed array would live in local memory).
struct K4Scales {
  std::uint32_t w0, w1, w2;
  __device__ int operator[](int i) const {
    const std::uint32_t w = i < 4 ? w0 : i < 8 ? w1 : w2;
    return static_cast<int>((w >> (8 * (i & 3))) & 0xFF);
  }
};

// Q4_K: 16 bytes of qs per unit = 16 weights of sub-block 2j (low nibbles) and 16 of sub-block 2j+1
// (high nibbles); 8 units per 144-byte super-block (needs a 16-byte aligned W: 144 = 9 * 16).
struct Q4K {
  static constexpr int kUnit = 32;
  template <int N>
  __device__ static void dot(const Args&, const std::uint8_t* row, std::int64_t k0, int u, const float* xs, float (&acc)[N]) {
    const std::uint8_t* b = row + (k0 / 256 + u / 8) * 144;
    const int sub = u % 8, j = sub / 2, h = sub & 1;
    const uint4 hdr = __ldg(reinterpret_cast<const uint4*>(b));
    const uint4 qv = __ldg(reinterpret_cast<const uint4*>(b + 16 + 32 * j + 16 * h));
    const K4Scales sc{hdr.y, hdr.z, hdr.w};
    const float d = h2f(static_cast<std::uint16_t>(hdr.x & 0xFFFF)), dmin = h2f(static_cast<std::uint16_t>(hdr.x >> 16));
    int s0, m0, s1, m1;
    formats::scale_min_k4(2 * j, sc, s0, m0);
    formats::scale_min_k4(2 * j + 1, sc, s1, m1);
    const float d0 = d * static_cast<float>(s0), n0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(s1), n1 = dmin * static_cast<float>(m1);
    const std::uint32_t qw[4] = {qv.x, qv.y, qv.z, qv.w};
    const int xlo = (u / 8) * 256 + 64 * j + 16 * h, xhi = xlo + 32;  // positions in the chunk
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const std::uint32_t byte = qw[i / 4] >> (8 * (i % 4));
      // d1 * q is exact (11 x 6 x 4 bits), so this equals gguf_dequant.cpp's `d1 * q - m1`.
      fma_tokens<N>(acc, d0 * (magic(byte & 0xF) - magic(0)) - n0, xs, xlo + i);
      fma_tokens<N>(acc, d1 * (magic((byte >> 4) & 0xF) - magic(0)) - n1, xs, xhi + i);
    }
  }
};

// Q6_K: 16 weights per unit, l in [l0, l0+4) of half nh for the four quarters (ql/qh/scales as
// gguf_dequant.cpp); 16 units per 210-byte super-block (2-byte aligned: 16-bit loads).
struct Q6K {
  static constexpr int kUnit = 16;
  template <int N>
  __device__ static void dot(const Args&, const std::uint8_t* row, std::int64_t k0, int u, const float* xs, float (&acc)[N]) {
    const std::uint8_t* b = row + (k0 / 256 + u / 16) * 210;
    const int sub = u % 16, nh = sub / 8, l0 = (sub % 8) * 4;
    const auto* ql = reinterpret_cast<const std::uint16_t*>(b + 64 * nh + l0);
    const auto* qh = reinterpret_cast<const std::uint16_t*>(b + 128 + 32 * nh + l0);
    const std::uint32_t lo = __ldg(ql) | (static_cast<std::uint32_t>(__ldg(ql + 1)) << 16);
    const std::uint32_t lo32 = __ldg(ql + 16) | (static_cast<std::uint32_t>(__ldg(ql + 17)) << 16);
    const std::uint32_t hi = __ldg(qh) | (static_cast<std::uint32_t>(__ldg(qh + 1)) << 16);
    const float d = h2f(__ldg(reinterpret_cast<const std::uint16_t*>(b + 208)));
    const std::int8_t* sc = reinterpret_cast<const std::int8_t*>(b + 192 + 8 * nh + l0 / 16);
    const int xbase = (u / 16) * 256 + 128 * nh + l0;
#pragma unroll
    for (int quarter = 0; quarter < 4; ++quarter) {
      const float ds = d * static_cast<float>(__ldg(sc + 2 * quarter));  // (d * sc) * q, as the reference
      const std::uint32_t lw = (quarter & 1) ? lo32 : lo;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const std::uint32_t low = (lw >> (8 * i + 4 * (quarter >> 1))) & 0xF;
        const std::uint32_t high = (hi >> (8 * i + 2 * quarter)) & 3;
        fma_tokens<N>(acc, ds * (magic(low | (high << 4)) - magic(32)), xs, xbase + 32 * quarter + i);
      }
    }
  }
};

// grid: ceil(rows / 16) blocks; block: 256 threads = 8 warps, warp w owning rows 16*blockIdx.x + 2w, +1.
// K is walked in chunks of 1024: the block stages x[0..N)[chunk] in shared memory (f32), then each lane
// takes units lane, lane+32, ... of both its rows. A warp shuffle sums the lanes; lane 0 writes y.
template <class Dec, int N>
__global__ void __launch_bounds__(kWarps * 32)
    rowwise_kernel(Args a, std::int64_t stride_bytes, const float* __restrict__ x, float* __restrict__ y) {
  __shared__ __align__(16) float xs[N * kChunk];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + warp * kRowsPerWarp;
  float acc[kRowsPerWarp][N] = {};
  for (std::int64_t k0 = 0; k0 < a.cols; k0 += kChunk) {
    const int len = static_cast<int>(a.cols - k0 < kChunk ? a.cols - k0 : kChunk);
    __syncthreads();  // the previous chunk has been used by every warp
    for (int t = 0; t < N; ++t)
      for (int i = threadIdx.x; i < len; i += blockDim.x) xs[t * kChunk + i] = x[t * a.cols + k0 + i];
    __syncthreads();
    const int units = len / Dec::kUnit;
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      if (r0 + rr >= a.rows) continue;
      const std::uint8_t* row = a.w + (r0 + rr) * stride_bytes;
#pragma unroll 4  // several weight loads in flight per lane
      for (int u = lane; u < units; u += 32) Dec::template dot<N>(a, row, k0, u, xs, acc[rr]);
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr)
#pragma unroll
    for (int t = 0; t < N; ++t) {
      float v = acc[rr][t];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0 && r0 + rr < a.rows) y[t * a.rows + r0 + rr] = v;
    }
}

template <class Dec>
void launch(const Args& a, std::int64_t stride_bytes, const float* x, int n, float* y) {
  const dim3 grid(static_cast<unsigned>((a.rows + kRowsPerBlock - 1) / kRowsPerBlock)), block(kWarps * 32);
  switch (n) {
    case 1: rowwise_kernel<Dec, 1><<<grid, block>>>(a, stride_bytes, x, y); break;
    case 2: rowwise_kernel<Dec, 2><<<grid, block>>>(a, stride_bytes, x, y); break;
    case 3: rowwise_kernel<Dec, 3><<<grid, block>>>(a, stride_bytes, x, y); break;
    case 4: rowwise_kernel<Dec, 4><<<grid, block>>>(a, stride_bytes, x, y); break;
    case 5: rowwise_kernel<Dec, 5><<<grid, block>>>(a, stride_bytes, x, y); break;
    case 6: rowwise_kernel<Dec, 6><<<grid, block>>>(a, stride_bytes, x, y); break;
    case 7: rowwise_kernel<Dec, 7><<<grid, block>>>(a, stride_bytes, x, y); break;
    default: rowwise_kernel<Dec, 8><<<grid, block>>>(a, stride_bytes, x, y); break;
  }
  MO_CUDA_CHECK("linear row-wise gemv", cudaGetLastError());
}

}  // namespace rowwise_detail
}  // namespace mo::engine::cuda_dev::lin
