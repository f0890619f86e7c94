// The CPU backend's block ops and paged attention over host buffers in the device layouts of
// backend.h: the same math as the CPU engine (ops/basic.h), reached through block tables and slots.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <span>
#include <vector>

#include <immintrin.h>

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
// [head_dim, ctx] when transposed (a query's scores over all positions are then one vector loop).
void gather(const AttentionArgs& a, bool values, const std::int32_t* table, int ctx, int kvh, float* out, bool transposed) {
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
        float* o = out + static_cast<std::int64_t>(d) * ctx + p0;
        for (int j = 0; j < m; ++j) o[j] = rows[static_cast<std::size_t>(j) * hd + d];
      }
  }
}

// s[p] = scale * sum over d of q[d] * kt[d][p] for p < n (kt: [hd, ctx]), each sum in d order (the same
// for every row: batch-invariant), four dims per pass over s.
void scores_of(const float* __restrict q, const float* __restrict kt, int ctx, int n, int hd, float scale, float* __restrict s) {
  std::fill(s, s + n, 0.0f);
  int d = 0;
  for (; d + 4 <= hd; d += 4) {
    const float q0 = q[d], q1 = q[d + 1], q2 = q[d + 2], q3 = q[d + 3];
    const float* __restrict k0 = kt + static_cast<std::int64_t>(d) * ctx;
    const float* __restrict k1 = k0 + ctx;
    const float* __restrict k2 = k1 + ctx;
    const float* __restrict k3 = k2 + ctx;
    for (int p = 0; p < n; ++p) {
      float acc = s[p];
      acc += q0 * k0[p];
      acc += q1 * k1[p];
      acc += q2 * k2[p];
      acc += q3 * k3[p];
      s[p] = acc;
    }
  }
  for (; d < hd; ++d) {
    const float qd = q[d];
    const float* __restrict kd = kt + static_cast<std::int64_t>(d) * ctx;
    for (int p = 0; p < n; ++p) s[p] += qd * kd[p];
  }
  for (int p = 0; p < n; ++p) s[p] *= scale;
}

// out[e] = sum over p of s[p] * v[p][e], added in position order (four positions per pass over out, the
// same additions in the same order as one at a time, so the result does not depend on the blocking).
void weighted_sum(const float* __restrict s, const float* __restrict v, int n, int hd, float* __restrict out) {
  std::fill(out, out + hd, 0.0f);
  int p = 0;
  for (; p + 4 <= n; p += 4) {
    const float s0 = s[p], s1 = s[p + 1], s2 = s[p + 2], s3 = s[p + 3];
    const float* __restrict v0 = v + static_cast<std::int64_t>(p) * hd;
    const float* __restrict v1 = v0 + hd;
    const float* __restrict v2 = v1 + hd;
    const float* __restrict v3 = v2 + hd;
    for (int e = 0; e < hd; ++e) {
      float acc = out[e];
      acc += s0 * v0[e];
      acc += s1 * v1[e];
      acc += s2 * v2[e];
      acc += s3 * v3[e];
      out[e] = acc;
    }
  }
  for (; p < n; ++p) {
    const float sp = s[p];
    const float* __restrict vp = v + static_cast<std::int64_t>(p) * hd;
    for (int e = 0; e < hd; ++e) out[e] += sp * vp[e];
  }
}

// Rows [r0, r1) of one sequence (contiguous, positions increasing) for one KV head: the context is
// widened once and serves every row and every query head of the GQA group. A row's result depends only
// on its own query and context, never on which rows share the task.
struct AttentionTask {
  int r0, r1, kvh;
};

void run_task(const AttentionArgs& a, const AttentionTask& t, std::vector<float>& keys, std::vector<float>& vals,
              std::vector<float>& scores) {
  const int hd = a.head_dim, group = a.num_heads / a.num_kv_heads;
  int ctx = 0;
  for (int r = t.r0; r < t.r1; ++r) ctx = std::max(ctx, a.row_ctx[r]);
  const std::int32_t* table = a.block_tables + static_cast<std::int64_t>(a.row_seq[t.r0]) * a.max_blocks_per_seq;
  keys.resize(static_cast<std::size_t>(ctx) * hd);
  vals.resize(static_cast<std::size_t>(ctx) * hd);
  scores.resize(ctx);
  gather(a, false, table, ctx, t.kvh, keys.data(), true);
  gather(a, true, table, ctx, t.kvh, vals.data(), false);
  for (int r = t.r0; r < t.r1; ++r) {
    const int visible = a.row_ctx[r];
    for (int g = 0; g < group; ++g) {
      const std::int64_t head = static_cast<std::int64_t>(t.kvh) * group + g;
      const float* q = a.q + (static_cast<std::int64_t>(r) * a.num_heads + head) * hd;
      float* out = a.out + (static_cast<std::int64_t>(r) * a.num_heads + head) * hd;
      scores_of(q, keys.data(), ctx, visible, hd, a.scale, scores.data());
      ops::softmax(scores.data(), visible);
      weighted_sum(scores.data(), vals.data(), visible, hd, out);
    }
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
