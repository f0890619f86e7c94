// Fused dequantize-GEMV kernels (1 <= n <= 8 tokens) for AWQ and GPTQ, whose qweight rows run along
// the outputs: threads own consecutive packed columns, K is split over the 8 warps of a block and over
// `ksplit` blocks (partials summed by reduce_partials: no atomics, deterministic). Every qweight word
// is read once and used for all N tokens; x is staged in shared memory. (q - z) * s is computed in
// f32 exactly as formats::QuantizedLinear::weight, with magic() in place of int->float conversions.
#include <algorithm>

#include "linear_kernels.cuh"

namespace mo::engine::cuda_dev::lin {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kMaxKb = 1024;  // inputs per block at most (x of N tokens staged in shared memory)

std::int64_t imin(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ std::int64_t dmin64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// xs[t * kMaxKb + i] = x[t, k0 + i] for i < k1 - k0.
template <int N>
__device__ __forceinline__ void stage_x(const float* __restrict__ x, std::int64_t cols, std::int64_t k0, std::int64_t k1, float* xs) {
  const int len = static_cast<int>(k1 - k0);
#pragma unroll
  for (int t = 0; t < N; ++t)
    for (int i = threadIdx.x; i < len; i += kThreads) xs[t * kMaxKb + i] = x[t * cols + k0 + i];
}

// Sums the 8 warps' acc[i][t] through red[8][OUTS][32] (conflict-free layout), one token at a time, and
// hands (t, i, lane, sum) to store for each of the block's OUTS * 32 outputs.
template <int N, int OUTS, class Store>
__device__ __forceinline__ void reduce_store(float (&acc)[OUTS][N], float* red, Store store) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < N; ++t) {
    __syncthreads();  // red is free again
#pragma unroll
    for (int i = 0; i < OUTS; ++i) red[(warp * OUTS + i) * 32 + lane] = acc[i][t];
    __syncthreads();
    for (int idx = threadIdx.x; idx < OUTS * 32; idx += kThreads) {
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s += red[w * OUTS * 32 + idx];
      store(t, idx / 32, idx % 32, s);
    }
  }
}

template <int VEC>
__device__ __forceinline__ void load_words(const std::uint32_t* p, std::uint32_t (&w)[VEC]) {
  if constexpr (VEC == 4) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (VEC == 2) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = v.x, w[1] = v.y;
  } else {
    w[0] = __ldg(p);
  }
}

// AWQ. grid: (plan.tiles, plan.ksplit); block: 256 threads = 8 warps. Block (bx, by) covers packed words
// [bx*32*VEC, +32*VEC) (lane l owns the VEC consecutive words from bx*32*VEC + l*VEC: 8*VEC outputs, one
// VEC*4-byte load per input) and inputs [by*kb, min(cols, (by+1)*kb)). Warp w takes inputs k0+w, k0+w+8, ...,
// so the 8 warps read 8 adjacent qweight rows at a time. Scales/zeros are reloaded per group segment.
// Writes out[(by*N + t)*rows + o] (y itself when ksplit == 1).
template <int N, int VEC>
__global__ void __launch_bounds__(kThreads, 2) awq_kernel(Args a, std::int64_t kb, const float* __restrict__ x, float* __restrict__ out) {
  __shared__ __align__(16) float xs[N * kMaxKb];
  __shared__ float red[kWarps * 8 * VEC * 32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t packed = a.rows / 8;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * 32 * VEC + lane * VEC;
  const std::int64_t k0 = static_cast<std::int64_t>(blockIdx.y) * kb, k1 = dmin64(a.cols, k0 + kb);
  stage_x<N>(x, a.cols, k0, k1, xs);
  __syncthreads();
  float acc[8 * VEC][N] = {};
  if (c0 < packed) {
    const auto* qw = reinterpret_cast<const std::uint32_t*>(a.w);
    for (std::int64_t ks = k0; ks < k1;) {
      const std::int64_t g = ks / a.group_size, ke = dmin64(k1, (g + 1) * a.group_size);
      float zf[8 * VEC], sf[8 * VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        const std::uint32_t zw = __ldg(a.qzeros + g * packed + c0 + v);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          zf[v * 8 + j] = magic((zw >> (4 * j)) & 0xF);
          sf[v * 8 + j] = h2f(__ldg(a.scales + g * a.rows + 8 * (c0 + v) + awq_out(j)));
        }
      }
      // First input of this segment that belongs to this warp.
      std::int64_t k = ks + ((warp - (ks - k0)) % kWarps + kWarps) % kWarps;
#pragma unroll 4
      for (; k < ke; k += kWarps) {
        std::uint32_t wv[VEC];
        load_words<VEC>(qw + k * packed + c0, wv);
        float xv[N];
#pragma unroll
        for (int t = 0; t < N; ++t) xv[t] = xs[t * kMaxKb + (k - k0)];
#pragma unroll
        for (int v = 0; v < VEC; ++v)
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float w = (magic((wv[v] >> (4 * j)) & 0xF) - zf[v * 8 + j]) * sf[v * 8 + j];
#pragma unroll
            for (int t = 0; t < N; ++t) acc[v * 8 + j][t] = fmaf(w, xv[t], acc[v * 8 + j][t]);
          }
      }
      ks = ke;
    }
  }
  reduce_store<N, 8 * VEC>(acc, red, [&](int t, int i, int ln, float s) {
    const std::int64_t word = static_cast<std::int64_t>(blockIdx.x) * 32 * VEC + ln * VEC + i / 8;
    if (word < packed) out[(static_cast<std::int64_t>(blockIdx.y) * N + t) * a.rows + 8 * word + awq_out(i % 8)] = s;
  });
}

// GPTQ. grid: (plan.tiles, plan.ksplit); block: 256 threads = 8 warps. Block (bx, by) covers outputs
// [bx*128, +128) (lane l owns outputs bx*128 + 4l .. +3: one 128-bit load per qweight row) and inputs
// [by*kb, min(cols, (by+1)*kb)), i.e. qweight rows k0/PF .. k1/PF; warp w takes rows k0/PF + w, +8, ...
// Each word gives PF = 32/BITS consecutive inputs. ACT: the group is looked up per input (g_idx staged in
// shared memory, or k / group_size when that is not a multiple of PF); otherwise once per qweight row.
template <int N, int BITS, bool ACT>
__global__ void __launch_bounds__(kThreads) gptq_kernel(Args a, std::int64_t kb, const float* __restrict__ x, float* __restrict__ out) {
  constexpr int PF = 32 / BITS;
  constexpr std::uint32_t MASK = (1u << BITS) - 1;
  __shared__ __align__(16) float xs[N * kMaxKb];
  __shared__ int gs[ACT ? kMaxKb : 1];
  __shared__ float red[kWarps * 4 * 32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t o0 = (static_cast<std::int64_t>(blockIdx.x) * 32 + lane) * 4;
  const std::int64_t k0 = static_cast<std::int64_t>(blockIdx.y) * kb, k1 = dmin64(a.cols, k0 + kb);
  stage_x<N>(x, a.cols, k0, k1, xs);
  if constexpr (ACT)
    for (int i = threadIdx.x; i < k1 - k0; i += kThreads) gs[i] = a.g_idx ? a.g_idx[k0 + i] : static_cast<int>((k0 + i) / a.group_size);
  __syncthreads();
  float acc[4][N] = {};
  if (o0 < a.rows) {
    const auto* qw = reinterpret_cast<const std::uint32_t*>(a.w);
    const std::int64_t zrow = a.rows / PF;
    std::int64_t cur = -1;
    float zf[4], sf[4];
    auto load_group = [&](std::int64_t g) {
      const std::uint32_t zw = __ldg(a.qzeros + g * zrow + o0 / PF);
      const uint2 sv = __ldg(reinterpret_cast<const uint2*>(a.scales + g * a.rows + o0));
#pragma unroll
      for (int v = 0; v < 4; ++v) zf[v] = magic(((zw >> (BITS * ((o0 + v) % PF))) & MASK) + a.zero_add);
      sf[0] = h2f(static_cast<std::uint16_t>(sv.x & 0xFFFF)), sf[1] = h2f(static_cast<std::uint16_t>(sv.x >> 16));
      sf[2] = h2f(static_cast<std::uint16_t>(sv.y & 0xFFFF)), sf[3] = h2f(static_cast<std::uint16_t>(sv.y >> 16));
      cur = g;
    };
#pragma unroll 2
    for (std::int64_t kr = k0 / PF + warp; kr < k1 / PF; kr += kWarps) {
      std::uint32_t wv[4];
      load_words<4>(qw + kr * a.rows + o0, wv);
      if constexpr (!ACT) {
        const std::int64_t g = kr * PF / a.group_size;
        if (g != cur) load_group(g);
      }
#pragma unroll
      for (int j = 0; j < PF; ++j) {
        const int i = static_cast<int>(kr * PF + j - k0);
        if constexpr (ACT) {
          if (gs[i] != cur) load_group(gs[i]);
        }
        float xv[N];
#pragma unroll
        for (int t = 0; t < N; ++t) xv[t] = xs[t * kMaxKb + i];
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const float w = (magic((wv[v] >> (BITS * j)) & MASK) - zf[v]) * sf[v];
#pragma unroll
          for (int t = 0; t < N; ++t) acc[v][t] = fmaf(w, xv[t], acc[v][t]);
        }
      }
    }
  }
  reduce_store<N, 4>(acc, red, [&](int t, int i, int ln, float s) {
    const std::int64_t o = (static_cast<std::int64_t>(blockIdx.x) * 32 + ln) * 4 + i;
    if (o < a.rows) out[(static_cast<std::int64_t>(blockIdx.y) * N + t) * a.rows + o] = s;
  });
}

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

template <int N>
void launch_awq(const Args& a, const PackedPlan& p, const float* x, float* out) {
  const dim3 grid(static_cast<unsigned>(p.tiles), static_cast<unsigned>(p.ksplit));
  if constexpr (N == 1) {
    if (p.vec == 4) {
      awq_kernel<1, 4><<<grid, kThreads>>>(a, p.kb, x, out);
      return;
    }
  }
  if constexpr (N <= 2) {
    if (p.vec == 2) {
      awq_kernel<N, 2><<<grid, kThreads>>>(a, p.kb, x, out);
      return;
    }
  }
  awq_kernel<N, 1><<<grid, kThreads>>>(a, p.kb, x, out);
}

template <int N>
void launch_gptq(const Args& a, const PackedPlan& p, const float* x, float* out) {
  const dim3 grid(static_cast<unsigned>(p.tiles), static_cast<unsigned>(p.ksplit));
  const bool act = a.g_idx != nullptr || a.group_size % (32 / a.bits) != 0;
  if (a.bits == 4 && act)
    gptq_kernel<N, 4, true><<<grid, kThreads>>>(a, p.kb, x, out);
  else if (a.bits == 4)
    gptq_kernel<N, 4, false><<<grid, kThreads>>>(a, p.kb, x, out);
  else if (act)
    gptq_kernel<N, 8, true><<<grid, kThreads>>>(a, p.kb, x, out);
  else
    gptq_kernel<N, 8, false><<<grid, kThreads>>>(a, p.kb, x, out);
}

template <int N>
void launch(const Args& a, const PackedPlan& p, const float* x, float* out) {
  if (a.kind == Kind::awq) {
    launch_awq<N>(a, p, x, out);
    MO_CUDA_CHECK("linear awq gemv", cudaGetLastError());
  } else {
    launch_gptq<N>(a, p, x, out);
    MO_CUDA_CHECK("linear gptq gemv", cudaGetLastError());
  }
}

}  // namespace

bool packed_gemv_plan(const Args& a, int n, int sm_count, PackedPlan& p) {
  if (a.kind == Kind::awq) {
    const std::int64_t packed = a.rows / 8;
    // Wider loads with fewer tokens keep the accumulators (8 * vec * n) within 32 registers.
    p.vec = n == 1 ? 4 : n == 2 ? 2 : 1;
    if (packed % p.vec != 0 || !aligned(a.w, 4u * p.vec)) p.vec = 1;
    if (!aligned(a.w, 4) || !aligned(a.qzeros, 4) || !aligned(a.scales, 2)) return false;
    p.tiles = (packed + 32 * p.vec - 1) / (32 * p.vec);
  } else if (a.kind == Kind::gptq) {
    p.vec = 4;
    if (!aligned(a.w, 16) || !aligned(a.qzeros, 4) || !aligned(a.scales, 8) || !aligned(a.g_idx, 4) || a.rows % 4 != 0) return false;
    p.tiles = (a.rows + 127) / 128;
  } else {
    return false;
  }
  // About 3 blocks per SM; each block's K range at least 64*n inputs (so the partials stay small next to
  // the weights), at most kMaxKb, and a multiple of 64 (whole qweight rows for every warp).
  const std::int64_t want = std::max<std::int64_t>(1, (3 * sm_count + p.tiles - 1) / p.tiles);
  std::int64_t kb = ((a.cols + want - 1) / want + 63) / 64 * 64;
  kb = std::clamp<std::int64_t>(kb, imin(kMaxKb, std::max<std::int64_t>(128, 64 * n)), kMaxKb);
  p.kb = kb;
  p.ksplit = (a.cols + kb - 1) / kb;
  return true;
}

void packed_gemv(const Args& a, const float* x, int n, const PackedPlan& p, float* out) {
  switch (n) {
    case 1: return launch<1>(a, p, x, out);
    case 2: return launch<2>(a, p, x, out);
    case 3: return launch<3>(a, p, x, out);
    case 4: return launch<4>(a, p, x, out);
    case 5: return launch<5>(a, p, x, out);
    case 6: return launch<6>(a, p, x, out);
    case 7: return launch<7>(a, p, x, out);
    default: return launch<8>(a, p, x, out);
  }
}

}  // namespace mo::engine::cuda_dev::lin
