// Tiled (flash-attention style) paged attention for prefill batches (AttentionArgs in backend.h, with
// the optional seq_first_row / num_seqs / max_rows_per_seq): a block serves several consecutive query
// rows of one sequence and all query heads of one KV head, and every K/V row it loads into shared
// memory is reused by all of them. Same math as attention.cu: f32 scores q·k * scale, online softmax
// in f32, GQA head h -> KV head h / (num_heads / num_kv_heads).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "check.cuh"
#include "cuda_ops.h"
#include "mo/core/error.h"

namespace mo::engine::cuda_dev {
namespace {

constexpr int kWarps = 4;                          // warps per block
constexpr int kThreads = kWarps * 32;              // threads per block
constexpr int kUnitsPerWarp = 8;                   // (row, head) query units each warp keeps in registers
constexpr int kUnits = kWarps * kUnitsPerWarp;     // query units per block: rows_per_tile * group
constexpr int kTileK = 32;                         // K/V positions per shared-memory tile (one per lane)
constexpr int kRowsPerWarpLoad = kTileK / kWarps;  // K/V rows each warp loads per tile
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Shared-memory layout for one head_dim (byte offsets into the dynamic buffer; every region 16-byte
// aligned). hd4 = ceil(hd / 4) "quads" of 4 elements: Q and K rows are zero-padded to 4 * hd4 so the
// score loop reads whole quads.
//   q: [kUnits][ldq] f32, ldq = 4 * hd4          the block's query vectors (zero for unused units)
//   p: [kWarps][kUnitsPerWarp][kTileK] f32       each warp's softmax weights of the current tile
//   k: [kTileK][ldk] f16, ldk = 4 * hd4 (+ 4)    ldk / 4 odd: lane p's 8-byte reads of row p hit
//                                                 distinct banks within each half-warp
//   v: [kTileK][ldv] f16, ldv = hd               lanes read consecutive words of one row
struct Layout {
  int hd4 = 0, ldq = 0, ldk = 0, ldv = 0;
  int q_off = 0, p_off = 0, k_off = 0, v_off = 0, bytes = 0;
};

__host__ __device__ inline Layout layout_for(int hd) {
  Layout L;
  L.hd4 = (hd + 3) / 4;
  L.ldq = 4 * L.hd4;
  L.ldk = 4 * L.hd4 + (L.hd4 % 2 == 0 ? 4 : 0);
  L.ldv = hd;
  const auto up16 = [](int b) { return (b + 15) / 16 * 16; };
  L.q_off = 0;
  L.p_off = L.q_off + up16(kUnits * L.ldq * 4);
  L.k_off = L.p_off + up16(kUnits * kTileK * 4);
  L.v_off = L.k_off + up16(kTileK * L.ldk * 2);
  L.bytes = L.v_off + up16(kTileK * L.ldv * 2);
  return L;
}

// exp(m - to) as a weight that is 0 for an empty state (m = -inf), never NaN.
__device__ __forceinline__ float rescale(float m, float to) { return m == kNegInf ? 0.0f : expf(m - to); }

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Grid (num_seqs * tiles_per_seq, num_kv_heads); block kThreads = 128 threads (4 warps); dynamic shared
// memory layout_for(head_dim).bytes (36 KiB at head_dim 128, 68 KiB at 256: above 48 KiB the launch opts
// in) plus a static int[kUnits].
// Tiles: block x = (s, t) serves rows seq_first_row[s] + t * tq .. + tq - 1 of sequence s (fewer in the
// sequence's last tile; a block whose first row is past the sequence exits at once), tq = kUnits / group,
// and the group query heads of KV head blockIdx.y: kUnits (row i, head g) "units", u = i * group + g.
// Warp w owns units u = j * kWarps + w, j < kUnitsPerWarp, and keeps for each an online-softmax state:
// running max m, sum l (uniform across the warp) and the f32 output accumulator, lane holding the dim
// pairs 2 * (lane + 32 e) + {0, 1}, e < NP (NP * 64 >= head_dim).
// The block walks positions 0 .. ctx_max - 1 (ctx_max: the largest row_ctx of its rows) in tiles of
// kTileK: (1) all warps load the tile's K and V rows (f16, through the block table; rows past ctx_max are
// zeros) into shared memory; (2) lane p computes the scores of position t0 + p for the warp's units
// (q from shared memory, broadcast), masks positions >= the unit's row_ctx to -inf, and the warp
// updates each unit's state (max and sum by shuffles) and stores the weights in its slice of p;
// (3) every lane adds weight * V for its dims over the tile's positions. Two __syncthreads per tile:
// before the load (the previous tile is no longer read) and after it.
template <int NP>
__global__ void __launch_bounds__(kThreads) prefill_attention_kernel(AttentionArgs a, int tq, int tiles_per_seq, Layout L) {
  const int s = static_cast<int>(blockIdx.x) / tiles_per_seq, t = static_cast<int>(blockIdx.x) % tiles_per_seq;
  const int kvh = blockIdx.y;
  const int end = a.seq_first_row[s + 1];
  const int row0 = a.seq_first_row[s] + t * tq;
  if (row0 >= end) return;  // uniform across the block: before any barrier
  const int nrows = min(tq, end - row0);
  const int hd = a.head_dim, nh = a.num_heads, group = nh / a.num_kv_heads, nvalid = nrows * group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  extern __shared__ __align__(16) unsigned char smem[];
  float* q_s = reinterpret_cast<float*>(smem + L.q_off);
  float* p_s = reinterpret_cast<float*>(smem + L.p_off) + warp * kUnitsPerWarp * kTileK;
  __half* k_s = reinterpret_cast<__half*>(smem + L.k_off);
  __half* v_s = reinterpret_cast<__half*>(smem + L.v_off);
  __shared__ int s_ctx[kUnits];  // row_ctx of the tile's rows (tq <= kUnits)

  // Stage the rows' contexts and the units' query vectors (zeros for unused units and padding dims);
  // zero K's padding dims (hd .. 4 * hd4 - 1), which the loads below never write.
  for (int i = threadIdx.x; i < tq; i += kThreads) s_ctx[i] = i < nrows ? a.row_ctx[row0 + i] : 0;
  const std::int64_t q_base = (static_cast<std::int64_t>(row0) * nh + static_cast<std::int64_t>(kvh) * group) * hd;
  for (int idx = threadIdx.x; idx < kUnits * L.ldq; idx += kThreads) {
    const int u = idx / L.ldq, d = idx % L.ldq;
    float x = 0.0f;
    if (u < nvalid && d < hd) {
      const int i = u / group, g = u % group;
      x = a.q[q_base + (static_cast<std::int64_t>(i) * nh + g) * hd + d];
    }
    q_s[idx] = x;
  }
  for (int idx = threadIdx.x; idx < kTileK * (L.ldq - hd); idx += kThreads) {
    const int pad = L.ldq - hd;
    k_s[(idx / pad) * L.ldk + hd + idx % pad] = __float2half(0.0f);
  }
  __syncthreads();

  int ctx_max = 0;
  for (int i = 0; i < nrows; ++i) ctx_max = max(ctx_max, s_ctx[i]);
  int uctx[kUnitsPerWarp];  // the unit's row_ctx; 0 for an unused unit (all masked)
  float m[kUnitsPerWarp], l[kUnitsPerWarp], acc[kUnitsPerWarp][2 * NP];
#pragma unroll
  for (int j = 0; j < kUnitsPerWarp; ++j) {
    const int u = j * kWarps + warp;
    uctx[j] = u < nvalid ? s_ctx[u / group] : 0;
    m[j] = kNegInf, l[j] = 0.0f;
#pragma unroll
    for (int e = 0; e < 2 * NP; ++e) acc[j][e] = 0.0f;
  }

  const std::int32_t* table = a.block_tables + static_cast<std::int64_t>(s) * a.max_blocks_per_seq;
  const std::int64_t slot_stride = static_cast<std::int64_t>(a.num_kv_heads) * hd;  // halves between slots
  const __half* kc = reinterpret_cast<const __half*>(a.k_cache) + static_cast<std::int64_t>(kvh) * hd;
  const __half* vc = reinterpret_cast<const __half*>(a.v_cache) + static_cast<std::int64_t>(kvh) * hd;
  const int words = hd / 2;  // 4-byte words (f16 pairs) per K/V row; hd is even

  for (int t0 = 0; t0 < ctx_max; t0 += kTileK) {
    __syncthreads();  // every warp is done reading the previous tile's K, V
                      // (1) Warp w loads rows w, w + kWarps, ... of the tile: lane reads words lane + 32 e.
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarpLoad; ++rr) {
      const int pl = rr * kWarps + warp, p = t0 + pl;
      auto* kd = reinterpret_cast<std::uint32_t*>(k_s + pl * L.ldk);
      auto* vd = reinterpret_cast<std::uint32_t*>(v_s + pl * L.ldv);
      if (p < ctx_max) {
        const std::int64_t slot = static_cast<std::int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
        const auto* ks = reinterpret_cast<const std::uint32_t*>(kc + slot * slot_stride);
        const auto* vs = reinterpret_cast<const std::uint32_t*>(vc + slot * slot_stride);
#pragma unroll
        for (int e = 0; e < NP; ++e) {
          const int w = lane + 32 * e;
          if (w < words) kd[w] = __ldg(ks + w), vd[w] = __ldg(vs + w);
        }
      } else {
#pragma unroll
        for (int e = 0; e < NP; ++e) {
          const int w = lane + 32 * e;
          if (w < words) kd[w] = 0u, vd[w] = 0u;
        }
      }
    }
    __syncthreads();

    // (2) Scores of position t0 + lane for the warp's units.
    float sc[kUnitsPerWarp];
#pragma unroll
    for (int j = 0; j < kUnitsPerWarp; ++j) sc[j] = 0.0f;
    const __half* krow = k_s + lane * L.ldk;
#pragma unroll 4
    for (int d4 = 0; d4 < L.hd4; ++d4) {
      const uint2 raw = *reinterpret_cast<const uint2*>(krow + 4 * d4);
      const float2 k01 = __half22float2(*reinterpret_cast<const __half2*>(&raw.x));
      const float2 k23 = __half22float2(*reinterpret_cast<const __half2*>(&raw.y));
#pragma unroll
      for (int j = 0; j < kUnitsPerWarp; ++j) {
        const float4 qv = *reinterpret_cast<const float4*>(q_s + (j * kWarps + warp) * L.ldq + 4 * d4);
        sc[j] += qv.x * k01.x + qv.y * k01.y + qv.z * k23.x + qv.w * k23.y;
      }
    }
    const int pos = t0 + lane;
#pragma unroll
    for (int j = 0; j < kUnitsPerWarp; ++j) {
      const bool valid = pos < uctx[j];
      const float x = valid ? sc[j] * a.scale : kNegInf;
      const float mt = warp_max(x);
      float w = 0.0f;
      if (mt != kNegInf) {  // uniform across the warp: some position of this tile is visible to the unit
        const float mn = fmaxf(m[j], mt), corr = rescale(m[j], mn);
        w = valid ? expf(x - mn) : 0.0f;
        l[j] = l[j] * corr + warp_sum(w);
#pragma unroll
        for (int e = 0; e < 2 * NP; ++e) acc[j][e] *= corr;
        m[j] = mn;
      }
      p_s[j * kTileK + lane] = w;
    }
    __syncwarp();

    // (3) acc += weight * V over the tile's loaded positions (rows past ctx_max are zeros, weight 0).
    const int n4 = (min(kTileK, ctx_max - t0) + 3) / 4;
    const auto* vw = reinterpret_cast<const std::uint32_t*>(v_s);
    for (int c = 0; c < n4; ++c) {
#pragma unroll
      for (int pp = 0; pp < 4; ++pp) {
        const int p = 4 * c + pp;
        float2 v[NP];
#pragma unroll
        for (int e = 0; e < NP; ++e) {
          const int w = lane + 32 * e;
          if (w < words) {
            const std::uint32_t bits = vw[p * (L.ldv / 2) + w];
            v[e] = __half22float2(*reinterpret_cast<const __half2*>(&bits));
          } else {
            v[e] = make_float2(0.0f, 0.0f);
          }
        }
#pragma unroll
        for (int j = 0; j < kUnitsPerWarp; ++j) {
          const float wj = p_s[j * kTileK + p];
#pragma unroll
          for (int e = 0; e < NP; ++e) {
            acc[j][2 * e] += wj * v[e].x;
            acc[j][2 * e + 1] += wj * v[e].y;
          }
        }
      }
    }
  }

#pragma unroll
  for (int j = 0; j < kUnitsPerWarp; ++j) {
    const int u = j * kWarps + warp;
    if (u >= nvalid) continue;
    const int i = u / group, g = u % group;
    float* out = a.out + (static_cast<std::int64_t>(row0 + i) * nh + static_cast<std::int64_t>(kvh) * group + g) * hd;
    // sum >= 1: the position with the max score adds exp(0) (row_ctx >= 1; as in attention.cu, a row whose
    // scores are all -inf gets 0 / 0, NaN, like the CPU's softmax).
    const float sum = l[j];
#pragma unroll
    for (int e = 0; e < NP; ++e) {
      const int d = 2 * (lane + 32 * e);
      if (d < hd) out[d] = acc[j][2 * e] / sum, out[d + 1] = acc[j][2 * e + 1] / sum;
    }
  }
}

template <int NP>
void launch(const AttentionArgs& a, int tq, int tiles_per_seq, const Layout& L) {
  const dim3 grid(static_cast<unsigned>(a.num_seqs) * static_cast<unsigned>(tiles_per_seq), static_cast<unsigned>(a.num_kv_heads));
  if (L.bytes > 48 * 1024)
    MO_CUDA_CHECK("attention_prefill: shared memory opt-in",
                  cudaFuncSetAttribute(prefill_attention_kernel<NP>, cudaFuncAttributeMaxDynamicSharedMemorySize, L.bytes));
  prefill_attention_kernel<NP><<<grid, kThreads, static_cast<std::size_t>(L.bytes)>>>(a, tq, tiles_per_seq, L);
  MO_CUDA_CHECK("attention_prefill", cudaGetLastError());
}

}  // namespace

void attention_prefill(const AttentionArgs& a) {
  if (a.n_rows <= 0) return;
  // Shapes this kernel does not take (and batches without row ranges) go to the per-row kernel, which
  // has the same contract and throws for unsupported shapes.
  const bool shape_ok = a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0 && a.num_heads / a.num_kv_heads <= 8 && a.head_dim >= 2 &&
                        a.head_dim <= 256 && a.head_dim % 2 == 0 && a.block_size > 0;
  if (!shape_ok || !a.seq_first_row || a.num_seqs <= 0 || a.max_rows_per_seq <= 0) return attention(a);
  const auto aligned4 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 4 == 0; };
  if (!aligned4(a.k_cache) || !aligned4(a.v_cache)) return attention(a);  // the loads read f16 pairs

  const int group = a.num_heads / a.num_kv_heads, tq = kUnits / group;
  const std::int64_t tiles_per_seq = (static_cast<std::int64_t>(a.max_rows_per_seq) + tq - 1) / tq;
  const std::int64_t grid_x = tiles_per_seq * a.num_seqs;
  if (grid_x > INT_MAX) return attention(a);
  const Layout L = layout_for(a.head_dim);

  const int sms = cuda_detail::device_attribute(cudaDevAttrMultiProcessorCount, "attention_prefill: SM count");
  const int smem_optin = cuda_detail::device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, "attention_prefill: shared memory limit");
  if (L.bytes + static_cast<int>(sizeof(int)) * kUnits > smem_optin) return attention(a);
  // Few blocks over long contexts (a short chunk after a long cached prefix): each block walks the whole
  // context alone, while the per-row kernel splits it over the SMs.
  constexpr int kLongCtx = 2048;
  if (a.max_ctx >= kLongCtx && grid_x * a.num_kv_heads < sms) return attention(a);

  const int tps = static_cast<int>(tiles_per_seq);
  if (a.head_dim <= 64) return launch<1>(a, tq, tps, L);
  if (a.head_dim <= 128) return launch<2>(a, tq, tps, L);
  launch<4>(a, tq, tps, L);
}

}  // namespace mo::engine::cuda_dev
