// The CPU backend's block ops and paged attention over host buffers in the device layouts of
// backend.h: the same math as the CPU engine (ops/basic.h), reached through block tables and slots.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <span>
#include <vector>

#include <immintrin.h>

#include "../cpu/fused_madd.h"
#include "../cpu/simd_target.h"
#include "cpu_ops.h"
#include "mo/core/half.h"
#include "mo/engine/ops/basic.h"
#include "mo/engine/ops/linear.h"

namespace mo::engine::cpu_dev {

namespace {

// f16 -> f32 is exact, so the F16C path gives the same floats as f16_to_f32 (attention widens the whole
// KV context with it at every step).
MO_SIMD_TARGET_PUSH("avx2,fma,f16c")
void f16_row_to_f32_f16c(const std::uint16_t* src, float* dst, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}
MO_SIMD_TARGET_POP

}  // namespace

void f16_row_to_f32(const std::uint16_t* src, float* dst, std::int64_t n) {
  if (ops::simd_level() != ops::SimdLevel::scalar) return f16_row_to_f32_f16c(src, dst, n);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void embedding(const std::uint16_t* table, std::int64_t dim, const std::int32_t* tokens, std::int64_t n, float* out) {
  for (std::int64_t t = 0; t < n; ++t) {
    const std::uint16_t* row = table + static_cast<std::int64_t>(tokens[t]) * dim;
    for (std::int64_t i = 0; i < dim; ++i) out[t * dim + i] = f16_to_f32(row[i]);
  }
}

void rms_norm(const float* x, const float* w, float* out, std::int64_t n, std::int64_t d, float eps) {
  ops::rms_norm(x, w, out, n, d, eps);
}

namespace {

// cos/sin of every (position, pair) already seen, for one RoPE setting: the same values ops::rope
// computes (same double formula), computed once per position instead of once per token and layer.
struct RopeTable {
  float theta = 0, freq_scale = 0;
  std::vector<float> factors;  // a copy: the table must not outlive a model whose factors differ
  std::int64_t head_dim = 0;
  std::vector<float> cs;  // [pos][half][cos, sin]
  std::int64_t positions = 0;

  const float* at(std::int64_t pos) {
    const std::int64_t half = head_dim / 2;
    if (pos >= positions) {
      const std::int64_t grow = std::max<std::int64_t>(pos + 1, positions * 2);
      cs.resize(static_cast<std::size_t>(grow * half * 2));
      for (std::int64_t p = positions; p < grow; ++p)
        for (std::int64_t i = 0; i < half; ++i) {
          double angle = static_cast<double>(p) * freq_scale * std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
          if (!factors.empty()) angle /= factors[i];
          cs[(p * half + i) * 2] = static_cast<float>(std::cos(angle));
          cs[(p * half + i) * 2 + 1] = static_cast<float>(std::sin(angle));
        }
      positions = grow;
    }
    return cs.data() + pos * half * 2;
  }
};

RopeTable& rope_table(float theta, float freq_scale, const float* factors, std::int64_t head_dim) {
  thread_local RopeTable t;
  const std::vector<float> f = factors ? std::vector<float>(factors, factors + head_dim / 2) : std::vector<float>();
  if (t.theta != theta || t.freq_scale != freq_scale || t.factors != f || t.head_dim != head_dim) {
    t = RopeTable{};
    t.theta = theta, t.freq_scale = freq_scale, t.factors = f, t.head_dim = head_dim;
  }
  return t;
}

}  // namespace

void rope(float* x, const std::int32_t* pos, std::int64_t n, std::int64_t heads, std::int64_t head_dim, float theta, float freq_scale,
          const float* factors, RopeStyle style) {
  RopeTable& table = rope_table(theta, freq_scale, factors, head_dim);
  const std::int64_t half = head_dim / 2;
  for (std::int64_t t = 0; t < n; ++t) {
    const float* cs = table.at(pos[t]);
    float* xt = x + t * heads * head_dim;
    for (std::int64_t h = 0; h < heads; ++h) {
      float* xh = xt + h * head_dim;
      for (std::int64_t i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const std::int64_t a = style == RopeStyle::normal ? 2 * i : i;
        const std::int64_t b = style == RopeStyle::normal ? 2 * i + 1 : i + half;
        const float x0 = xh[a], x1 = xh[b];
        xh[a] = x0 * c - x1 * s;
        xh[b] = x0 * s + x1 * c;
      }
    }
  }
}

void silu_mul(float* gate, const float* up, std::int64_t n) { ops::silu_mul(gate, up, n); }

void add(float* x, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void add_bias(float* y, const float* bias, std::int64_t n, std::int64_t d) {
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < d; ++i) y[t * d + i] += bias[i];
}

void scale_columns(float* y, const float* s, std::int64_t n, std::int64_t d) {
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < d; ++i) y[t * d + i] *= s[i];
}

void causal_softmax(float* s, std::int64_t n, std::int64_t ld) {
  for (std::int64_t i = 0; i < n; ++i) {
    float* row = s + i * ld;
    ops::softmax(row, static_cast<int>(i + 1));
    std::fill(row + i + 1, row + n, 0.0f);
  }
}

void kv_write(std::uint16_t* k_cache, std::uint16_t* v_cache, const float* k, const float* v, const std::int32_t* slots, std::int64_t n,
              std::int64_t row) {
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t dst = static_cast<std::int64_t>(slots[t]) * row;
    for (std::int64_t i = 0; i < row; ++i) {
      k_cache[dst + i] = f32_to_f16(k[t * row + i]);
      v_cache[dst + i] = f32_to_f16(v[t * row + i]);
    }
  }
}

namespace {

// Positions [0, ctx) of one sequence's K or V for one KV head, widened to f32: out is [ctx, head_dim], or
// [head_dim, stride] when transposed (a query's scores over all positions are then one vector loop).
void gather(const AttentionArgs& a, bool values, const std::int32_t* table, int ctx, int kvh, float* out, bool transposed, int stride) {
  const int hd = a.head_dim;
  constexpr int kBlock = 8;  // positions widened together, then written transposed 8 contiguous floats at a time
  thread_local std::vector<float> rows;
  rows.resize(static_cast<std::size_t>(kBlock) * hd);
  for (int p0 = 0; p0 < ctx; p0 += kBlock) {
    const int m = std::min(kBlock, ctx - p0);
    for (int j = 0; j < m; ++j) {
      const int p = p0 + j;
      const std::int64_t slot = static_cast<std::int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
      const std::int64_t at = (slot * a.num_kv_heads + kvh) * hd;
      float* dst = transposed ? rows.data() + static_cast<std::int64_t>(j) * hd : out + static_cast<std::int64_t>(p) * hd;
      if (a.k_cache_f32) {
        std::memcpy(dst, (values ? a.v_cache_f32 : a.k_cache_f32) + at, hd * sizeof(float));
      } else {
        f16_row_to_f32((values ? a.v_cache : a.k_cache) + at, dst, hd);
      }
    }
    if (transposed)
      for (int d = 0; d < hd; ++d) {
        float* o = out + static_cast<std::int64_t>(d) * stride + p0;
        for (int j = 0; j < m; ++j) o[j] = rows[static_cast<std::size_t>(j) * hd + d];
      }
  }
}

using ops::madd;  // the plain loops round as their AVX2 twins

constexpr int kQueries = 4;     // query vectors per pass: each key or value vector loaded serves all of them
constexpr int kPositions = 16;  // positions (or value dims) per register block

// s_j[p] = scale * sum over d of q_j[d] * kt[d][p], for p < n (kt: [hd, stride], zero beyond ctx; s_j: row j of
// [kQueries, stride]), each sum in d order from zero: the same arithmetic for every query whatever the others in
// its pass (batch-invariant), in every implementation below. Unused query slots repeat query 0.
void scores_of(const float* const* q, const float* __restrict kt, int stride, int n, int hd, float scale, float* __restrict s) {
  for (int p0 = 0; p0 < n; p0 += kPositions) {
    float acc[kQueries][kPositions] = {};
    for (int d = 0; d < hd; ++d) {
      const float* __restrict k = kt + static_cast<std::int64_t>(d) * stride + p0;
      for (int j = 0; j < kQueries; ++j)
        for (int l = 0; l < kPositions; ++l) acc[j][l] = madd(q[j][d], k[l], acc[j][l]);
    }
    for (int j = 0; j < kQueries; ++j)
      for (int l = 0; l < kPositions; ++l) s[static_cast<std::int64_t>(j) * stride + p0 + l] = acc[j][l] * scale;
  }
}

// out_j[e] = sum over p < n of s_j[p] * v[p][e], added in position order from zero (s_j is zero from the
// query's own context length on, which adds exact zeros); v has kPositions floats of padding past its end.
// Only the first nq outputs are written.
void weighted_sum(const float* __restrict s, int stride, int nq, const float* __restrict v, int n, int hd, float* const* out) {
  for (int e0 = 0; e0 < hd; e0 += kPositions) {
    float acc[kQueries][kPositions] = {};
    for (int p = 0; p < n; ++p) {
      const float* __restrict vp = v + static_cast<std::int64_t>(p) * hd + e0;
      for (int j = 0; j < kQueries; ++j)
        for (int l = 0; l < kPositions; ++l) acc[j][l] = madd(s[static_cast<std::int64_t>(j) * stride + p], vp[l], acc[j][l]);
    }
    const int m = std::min(kPositions, hd - e0);
    for (int j = 0; j < nq; ++j) std::copy(acc[j], acc[j] + m, out[j] + e0);
  }
}

// The same two loops with the 4 x 16 accumulators in AVX2 registers (the plain loops above spill them).
MO_SIMD_TARGET_PUSH("avx2,fma")
void scores_of_avx2(const float* const* q, const float* __restrict kt, int stride, int n, int hd, float scale, float* __restrict s) {
  const __m256 sc = _mm256_set1_ps(scale);
  for (int p0 = 0; p0 < n; p0 += kPositions) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0, d1 = a0;
    for (int d = 0; d < hd; ++d) {
      const float* k = kt + static_cast<std::int64_t>(d) * stride + p0;
      const __m256 k0 = _mm256_loadu_ps(k), k1 = _mm256_loadu_ps(k + 8);
      __m256 x = _mm256_broadcast_ss(q[0] + d);
      a0 = _mm256_fmadd_ps(x, k0, a0);
      a1 = _mm256_fmadd_ps(x, k1, a1);
      x = _mm256_broadcast_ss(q[1] + d);
      b0 = _mm256_fmadd_ps(x, k0, b0);
      b1 = _mm256_fmadd_ps(x, k1, b1);
      x = _mm256_broadcast_ss(q[2] + d);
      c0 = _mm256_fmadd_ps(x, k0, c0);
      c1 = _mm256_fmadd_ps(x, k1, c1);
      x = _mm256_broadcast_ss(q[3] + d);
      d0 = _mm256_fmadd_ps(x, k0, d0);
      d1 = _mm256_fmadd_ps(x, k1, d1);
    }
    float* o = s + p0;
    const std::int64_t st = stride;
    _mm256_storeu_ps(o, _mm256_mul_ps(a0, sc));
    _mm256_storeu_ps(o + 8, _mm256_mul_ps(a1, sc));
    _mm256_storeu_ps(o + st, _mm256_mul_ps(b0, sc));
    _mm256_storeu_ps(o + st + 8, _mm256_mul_ps(b1, sc));
    _mm256_storeu_ps(o + 2 * st, _mm256_mul_ps(c0, sc));
    _mm256_storeu_ps(o + 2 * st + 8, _mm256_mul_ps(c1, sc));
    _mm256_storeu_ps(o + 3 * st, _mm256_mul_ps(d0, sc));
    _mm256_storeu_ps(o + 3 * st + 8, _mm256_mul_ps(d1, sc));
  }
}

void weighted_sum_avx2(const float* __restrict s, int stride, int nq, const float* __restrict v, int n, int hd, float* const* out) {
  const std::int64_t st = stride;
  for (int e0 = 0; e0 < hd; e0 += kPositions) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0, d1 = a0;
    for (int p = 0; p < n; ++p) {
      const float* vp = v + static_cast<std::int64_t>(p) * hd + e0;
      const __m256 v0 = _mm256_loadu_ps(vp), v1 = _mm256_loadu_ps(vp + 8);
      __m256 x = _mm256_broadcast_ss(s + p);
      a0 = _mm256_fmadd_ps(x, v0, a0);
      a1 = _mm256_fmadd_ps(x, v1, a1);
      x = _mm256_broadcast_ss(s + st + p);
      b0 = _mm256_fmadd_ps(x, v0, b0);
      b1 = _mm256_fmadd_ps(x, v1, b1);
      x = _mm256_broadcast_ss(s + 2 * st + p);
      c0 = _mm256_fmadd_ps(x, v0, c0);
      c1 = _mm256_fmadd_ps(x, v1, c1);
      x = _mm256_broadcast_ss(s + 3 * st + p);
      d0 = _mm256_fmadd_ps(x, v0, d0);
      d1 = _mm256_fmadd_ps(x, v1, d1);
    }
    alignas(32) float acc[kQueries][kPositions];
    _mm256_store_ps(acc[0], a0);
    _mm256_store_ps(acc[0] + 8, a1);
    _mm256_store_ps(acc[1], b0);
    _mm256_store_ps(acc[1] + 8, b1);
    _mm256_store_ps(acc[2], c0);
    _mm256_store_ps(acc[2] + 8, c1);
    _mm256_store_ps(acc[3], d0);
    _mm256_store_ps(acc[3] + 8, d1);
    const int m = std::min(kPositions, hd - e0);
    for (int j = 0; j < nq; ++j) std::copy(acc[j], acc[j] + m, out[j] + e0);
  }
}
MO_SIMD_TARGET_POP

// Rows [r0, r1) of one sequence (contiguous, positions increasing) for one KV head: the context is
// widened once and serves every row and every query head of the GQA group. A row's result depends only
// on its own query and context, never on which rows share the task or a pass.
struct AttentionTask {
  int r0, r1, kvh;
};

void run_task(const AttentionArgs& a, const AttentionTask& t, std::vector<float>& keys, std::vector<float>& vals,
              std::vector<float>& scores) {
  const int hd = a.head_dim, group = a.num_heads / a.num_kv_heads;
  int ctx = 0;
  for (int r = t.r0; r < t.r1; ++r) ctx = std::max(ctx, a.row_ctx[r]);
  const int stride = (ctx + kPositions - 1) / kPositions * kPositions;
  const std::int32_t* table = a.block_tables + static_cast<std::int64_t>(a.row_seq[t.r0]) * a.max_blocks_per_seq;
  keys.resize(static_cast<std::size_t>(stride) * hd);
  vals.resize(static_cast<std::size_t>(ctx) * hd + kPositions);
  scores.resize(static_cast<std::size_t>(kQueries) * stride);
  gather(a, false, table, ctx, t.kvh, keys.data(), true, stride);
  gather(a, true, table, ctx, t.kvh, vals.data(), false, stride);
  for (int d = 0; d < hd; ++d) {  // only the padding past ctx: gather wrote the rest
    float* row = keys.data() + static_cast<std::int64_t>(d) * stride;
    std::fill(row + ctx, row + stride, 0.0f);
  }
  std::fill(vals.end() - kPositions, vals.end(), 0.0f);
  const bool avx2 = ops::simd_level() != ops::SimdLevel::scalar;
  // Query vectors in (row, head) order, kQueries per pass.
  const int total = (t.r1 - t.r0) * group;
  for (int first = 0; first < total; first += kQueries) {
    const int nq = std::min(kQueries, total - first);
    const float* q[kQueries];
    float* out[kQueries];
    int visible[kQueries], n = 0;
    for (int j = 0; j < nq; ++j) {
      const int r = t.r0 + (first + j) / group;
      const std::int64_t head = static_cast<std::int64_t>(t.kvh) * group + (first + j) % group;
      q[j] = a.q + (static_cast<std::int64_t>(r) * a.num_heads + head) * hd;
      out[j] = a.out + (static_cast<std::int64_t>(r) * a.num_heads + head) * hd;
      visible[j] = a.row_ctx[r];
      n = std::max(n, visible[j]);
    }
    for (int j = nq; j < kQueries; ++j) q[j] = q[0];  // computed and dropped: the loops stay branch-free
    (avx2 ? scores_of_avx2 : scores_of)(q, keys.data(), stride, n, hd, a.scale, scores.data());
    for (int j = 0; j < nq; ++j) {
      float* sj = scores.data() + static_cast<std::int64_t>(j) * stride;
      ops::softmax(sj, visible[j]);
      std::fill(sj + visible[j], sj + n, 0.0f);
    }
    (avx2 ? weighted_sum_avx2 : weighted_sum)(scores.data(), stride, nq, vals.data(), n, hd, out);
  }
}

// Tasks of about equal work: each sequence's rows are cut so a task's rows cost at most `budget`
// (row cost = its context length), times every KV head.
std::vector<AttentionTask> plan(const AttentionArgs& a, int threads) {
  std::vector<std::pair<int, int>> seqs;  // row ranges of the sequences
  for (int r = 0; r < a.n_rows;) {
    int e = r + 1;
    while (e < a.n_rows && a.row_seq[e] == a.row_seq[r]) ++e;
    seqs.push_back({r, e});
    r = e;
  }
  std::int64_t total = 0;
  for (int r = 0; r < a.n_rows; ++r) total += a.row_ctx[r];
  const std::int64_t want = std::max<std::int64_t>(1, 4LL * threads / std::max(1, a.num_kv_heads));
  const std::int64_t budget = std::max<std::int64_t>(1, total / want);
  std::vector<AttentionTask> tasks;
  for (const auto& [s0, s1] : seqs) {
    for (int r = s0; r < s1;) {
      int e = r;
      std::int64_t cost = 0;
      while (e < s1 && (e == r || cost + a.row_ctx[e] <= budget)) cost += a.row_ctx[e++];
      for (int h = 0; h < a.num_kv_heads; ++h) tasks.push_back({r, e, h});
      r = e;
    }
  }
  return tasks;
}

}  // namespace

void attention(const AttentionArgs& a, ThreadPool& pool) {
  if (a.n_rows <= 0) return;
  const std::vector<AttentionTask> tasks = plan(a, pool.size());
  pool.parallel_for(0, static_cast<std::int64_t>(tasks.size()), [&](std::int64_t b, std::int64_t e, int) {
    thread_local std::vector<float> keys, vals, scores;
    for (std::int64_t i = b; i < e; ++i) run_task(a, tasks[i], keys, vals, scores);
  });
}

}  // namespace mo::engine::cpu_dev
