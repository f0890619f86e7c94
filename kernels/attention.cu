// Paged attention over f16 KV blocks (AttentionArgs in backend.h): one kernel for decode (many
// sequences, one row each) and ragged prefill (many rows of one sequence, each with its own row_ctx).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "check.cuh"
#include "cuda_ops.h"
#include "mo/core/error.h"

namespace mo::engine::cuda_dev {
namespace {

constexpr int kWarps = 4;  // warps per block; each walks its own share of the positions
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Dimension held by element e of team lane lt. Vector layout: 8 contiguous halves per lane (one 16-byte
// load); strided layout (any head_dim <= 256): lane lt holds lt, lt + T, ... so loads stay coalesced.
template <int E, int T, bool VEC>
__device__ __forceinline__ int dim_of(int e, int lt) {
  return VEC ? lt * E + e : e * T + lt;
}

// Widens the lane's E elements of one f16 row (zeros past head_dim).
template <int E, int T, bool VEC>
__device__ __forceinline__ void load_row(const __half* row, int lt, int hd, float (&x)[E]) {
  if constexpr (VEC) {
    static_assert(E == 8, "the vector layout loads 8 halves per lane");
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(row) + lt);
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      x[2 * i] = f.x, x[2 * i + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int d = dim_of<E, T, VEC>(e, lt);
      x[e] = d < hd ? __half2float(row[d]) : 0.0f;
    }
  }
}

// exp(m - to) as a weight that is 0 for an empty state (m = -inf), never NaN.
__device__ __forceinline__ float rescale(float m, float to) { return m == kNegInf ? 0.0f : expf(m - to); }

// Where a split-context launch leaves its per-split results: [n_rows * num_heads, splits] states.
struct Partials {
  float* o = nullptr;  // [.., splits, head_dim] unnormalised outputs
  float* m = nullptr;  // [.., splits] running max
  float* l = nullptr;  // [.., splits] sum of exp(score - m)
};

// Grid (n_rows, num_kv_heads, splits); block kWarps * 32 threads; dynamic shared memory
// kWarps * group * (head_dim + 2) floats. Block (r, kvh, z) serves the `group` = num_heads / num_kv_heads
// query heads of row r that share KV head kvh, so each K/V row is read once per group (GQA), over
// positions [z * chunk, (z + 1) * chunk) of the row's context (the last split: up to row_ctx).
// A "team" of T lanes holds one K/V row (E elements per lane, E * T >= head_dim); a warp holds
// 32 / T teams, and team j of warp w walks positions begin + w * 32/T + j, stepping by all the block's
// teams. Each team keeps, per query head, an online-softmax running max m, sum l and output
// accumulator (f32; scores = q·k * scale in f32). At the end the teams of a warp merge by shuffles and
// the warps through shared memory; with one split the block writes the output, else its (o, m, l) to
// `part` for combine_kernel. Shared memory does not grow with the context: any row_ctx works.
template <int E, int T, bool VEC, int GMAX>
__global__ void __launch_bounds__(kWarps * 32) paged_attention_kernel(AttentionArgs a, int chunk, Partials part) {
  constexpr int kTeams = 32 / T;  // teams per warp
  const int r = blockIdx.x, kvh = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, team = lane / T, lt = lane % T;
  const int hd = a.head_dim, group = a.num_heads / a.num_kv_heads, ctx = a.row_ctx[r];
  const std::int32_t* table = a.block_tables + static_cast<std::int64_t>(a.row_seq[r]) * a.max_blocks_per_seq;
  const std::int64_t slot_stride = static_cast<std::int64_t>(a.num_kv_heads) * hd;  // halves between slots
  const __half* kc = reinterpret_cast<const __half*>(a.k_cache) + static_cast<std::int64_t>(kvh) * hd;
  const __half* vc = reinterpret_cast<const __half*>(a.v_cache) + static_cast<std::int64_t>(kvh) * hd;
  const std::int64_t head0 = static_cast<std::int64_t>(r) * a.num_heads + static_cast<std::int64_t>(kvh) * group;

  float q[GMAX][E], acc[GMAX][E], m[GMAX], l[GMAX];
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int d = dim_of<E, T, VEC>(e, lt);
      q[g][e] = g < group && d < hd ? a.q[(head0 + g) * hd + d] : 0.0f;
      acc[g][e] = 0.0f;
    }
    m[g] = kNegInf, l[g] = 0.0f;
  }

  // The loop bound is uniform across the warp, so every lane reaches the shuffles.
  const int begin = static_cast<int>(blockIdx.z) * chunk;
  const int end = blockIdx.z + 1 == gridDim.z ? ctx : min(ctx, begin + chunk);  // empty when begin >= ctx
  for (int base = begin + warp * kTeams; base < end; base += kWarps * kTeams) {
    const int p = base + team;
    const bool valid = p < end;
    float k[E], v[E];
    if (valid) {
      const std::int64_t slot = static_cast<std::int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
      load_row<E, T, VEC>(kc + slot * slot_stride, lt, hd, k);
      load_row<E, T, VEC>(vc + slot * slot_stride, lt, hd, v);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) k[e] = v[e] = 0.0f;
    }
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
      if (g >= group) break;  // group is uniform across the block
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) s += q[g][e] * k[e];
#pragma unroll
      for (int o = T / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);  // sum over the team
      if (valid) {
        s *= a.scale;
        const float mn = fmaxf(m[g], s);
        // rescale, not expf: a -inf score seen first (mn = -inf) would give expf(NaN); the CPU gives it weight 0.
        const float corr = rescale(m[g], mn), w = rescale(s, mn);
        l[g] = l[g] * corr + w;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[g][e] = acc[g][e] * corr + w * v[e];
        m[g] = mn;
      }
    }
  }

  // Merge the teams of the warp: lanes lt, lt + T, ... hold the same dimensions.
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    if (g >= group) break;
#pragma unroll
    for (int o = T; o < 32; o <<= 1) {
      const float mo = __shfl_xor_sync(0xffffffffu, m[g], o), lo = __shfl_xor_sync(0xffffffffu, l[g], o);
      const float mn = fmaxf(m[g], mo), c0 = rescale(m[g], mn), c1 = rescale(mo, mn);
      l[g] = l[g] * c0 + lo * c1;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float ao = __shfl_xor_sync(0xffffffffu, acc[g][e], o);
        acc[g][e] = acc[g][e] * c0 + ao * c1;
      }
      m[g] = mn;
    }
  }

  // Merge the warps in shared memory: s_acc [kWarps][group][hd], then s_m and s_l [kWarps][group].
  extern __shared__ float smem[];
  float* s_acc = smem;
  float* s_m = smem + kWarps * group * hd;
  float* s_l = s_m + kWarps * group;
  if (team == 0) {
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
      if (g >= group) break;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int d = dim_of<E, T, VEC>(e, lt);
        if (d < hd) s_acc[(warp * group + g) * hd + d] = acc[g][e];
      }
      if (lt == 0) s_m[warp * group + g] = m[g], s_l[warp * group + g] = l[g];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * hd; i += blockDim.x) {
    const int g = i / hd, d = i % hd;
    float mx = kNegInf;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_m[w * group + g]);
    float sum = 0.0f, o = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float c = rescale(s_m[w * group + g], mx);
      sum += s_l[w * group + g] * c;
      o += s_acc[(w * group + g) * hd + d] * c;
    }
    if (gridDim.z == 1) {
      a.out[(head0 + g) * hd + d] = o / sum;  // sum >= 1: the position with the max score adds exp(0)
    } else {
      const std::int64_t ps = (head0 + g) * gridDim.z + blockIdx.z;  // this split's state of head0 + g
      part.o[ps * hd + d] = o;
      if (d == 0) part.m[ps] = mx, part.l[ps] = sum;  // an empty split: m = -inf, l = 0, o = 0
    }
  }
}

// Grid (n_rows * num_heads); block 128 threads over head_dim. Merges the splits' states of one query
// head: out = Σ o_z e^(m_z - M) / Σ l_z e^(m_z - M), M = max m_z (split 0 is never empty, so M is finite).
__global__ void __launch_bounds__(128) combine_kernel(Partials part, int splits, int hd, float* out) {
  const std::int64_t rh = blockIdx.x;
  float mx = kNegInf;
  for (int z = 0; z < splits; ++z) mx = fmaxf(mx, part.m[rh * splits + z]);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float sum = 0.0f, o = 0.0f;
    for (int z = 0; z < splits; ++z) {
      const float c = rescale(part.m[rh * splits + z], mx);
      sum += part.l[rh * splits + z] * c;
      o += part.o[(rh * splits + z) * hd + d] * c;
    }
    out[rh * hd + d] = o / sum;
  }
}

template <int E, int T, bool VEC>
void launch(const AttentionArgs& a, int group, int splits, int chunk, const Partials& part) {
  const dim3 grid(static_cast<unsigned>(a.n_rows), static_cast<unsigned>(a.num_kv_heads), static_cast<unsigned>(splits));
  const std::size_t smem = static_cast<std::size_t>(kWarps) * group * (a.head_dim + 2) * sizeof(float);  // <= 33 KiB
  if (group == 1)
    paged_attention_kernel<E, T, VEC, 1><<<grid, kWarps * 32, smem>>>(a, chunk, part);
  else if (group == 2)
    paged_attention_kernel<E, T, VEC, 2><<<grid, kWarps * 32, smem>>>(a, chunk, part);
  else if (group <= 4)
    paged_attention_kernel<E, T, VEC, 4><<<grid, kWarps * 32, smem>>>(a, chunk, part);
  else
    paged_attention_kernel<E, T, VEC, 8><<<grid, kWarps * 32, smem>>>(a, chunk, part);
  MO_CUDA_CHECK("attention", cudaGetLastError());
}

void launch_for_shape(const AttentionArgs& a, int group, int splits, int chunk, const Partials& part) {
  // 16-byte loads need 16-byte aligned rows: head_dim a multiple of 8 and aligned cache bases.
  const auto aligned16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool vec = aligned16(a.k_cache) && aligned16(a.v_cache);
  if (vec && a.head_dim == 8) return launch<8, 1, true>(a, group, splits, chunk, part);
  if (vec && a.head_dim == 64) return launch<8, 8, true>(a, group, splits, chunk, part);
  if (vec && a.head_dim == 128) return launch<8, 16, true>(a, group, splits, chunk, part);
  if (vec && a.head_dim == 256) return launch<8, 32, true>(a, group, splits, chunk, part);
  launch<8, 32, false>(a, group, splits, chunk, part);  // any other head_dim <= 256: strided scalar loads
}

// How many splits of the context: when (rows x KV heads) blocks would leave most SMs idle and the
// contexts are long (few-sequence decode), split them so about two blocks per SM stream the cache.
int choose_splits(const AttentionArgs& a) {
  constexpr int kMinCtx = 512, kMinChunk = 256, kMaxSplits = 64;
  if (a.max_ctx < kMinCtx) return 1;
  const int sms = cuda_detail::device_attribute(cudaDevAttrMultiProcessorCount, "attention: SM count");
  const std::int64_t blocks = static_cast<std::int64_t>(a.n_rows) * a.num_kv_heads, target = 2 * static_cast<std::int64_t>(sms);
  if (blocks >= target) return 1;
  const std::int64_t by_sms = (target + blocks - 1) / blocks, by_ctx = (a.max_ctx + kMinChunk - 1) / kMinChunk;
  return static_cast<int>(std::min<std::int64_t>({by_sms, by_ctx, kMaxSplits}));
}

}  // namespace

void attention(const AttentionArgs& a) {
  if (a.n_rows <= 0) return;
  if (a.num_kv_heads <= 0 || a.num_heads % a.num_kv_heads != 0 || a.num_heads / a.num_kv_heads > 8 || a.head_dim < 1 || a.head_dim > 256 ||
      a.block_size <= 0)
    throw Error("attention: unsupported shape (heads " + std::to_string(a.num_heads) + ", kv heads " + std::to_string(a.num_kv_heads) +
                ", head_dim " + std::to_string(a.head_dim) + ", block_size " + std::to_string(a.block_size) +
                "): needs a GQA group of 1..8 and head_dim 1..256");
  const int group = a.num_heads / a.num_kv_heads;
  int splits = choose_splits(a);
  struct Scratch {  // returned to the pool even when a launch throws
    void* p = nullptr;
    ~Scratch() {
      if (p) cudaFreeAsync(p, 0);
    }
  } scratch;
  const std::size_t states = static_cast<std::size_t>(a.n_rows) * a.num_heads * splits;
  // Stream-ordered scratch from the device's memory pool (no device-wide sync); without it, one split.
  if (splits > 1 && cudaMallocAsync(&scratch.p, states * (a.head_dim + 2) * sizeof(float), 0) != cudaSuccess) {
    cudaGetLastError();  // clear the failed allocation
    splits = 1, scratch.p = nullptr;
  }
  if (splits == 1) return launch_for_shape(a, group, 1, a.max_ctx, Partials{});
  Partials part;
  part.o = static_cast<float*>(scratch.p);
  part.m = part.o + states * a.head_dim;
  part.l = part.m + states;
  const int chunk = (a.max_ctx + splits - 1) / splits;
  launch_for_shape(a, group, splits, chunk, part);
  combine_kernel<<<static_cast<unsigned>(a.n_rows) * a.num_heads, 128>>>(part, splits, a.head_dim, a.out);
  MO_CUDA_CHECK("attention: combine", cudaGetLastError());
  void* p = scratch.p;
  scratch.p = nullptr;
  MO_CUDA_CHECK("attention: free scratch", cudaFreeAsync(p, 0));
}

}  // namespace mo::engine::cuda_dev
