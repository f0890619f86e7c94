// The CPU backend's block ops and paged attention over host buffers in the device layouts of
// backend.h: the same math as the CPU engine (ops/basic.h), reached through block tables and slots.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "cpu_ops.h"
#include "mo/core/half.h"
#include "mo/engine/ops/basic.h"
#include "mo/engine/ops/linear.h"

namespace mo::engine::cpu_dev {

void embedding(const std::uint16_t* table, std::int64_t dim, const std::int32_t* tokens, std::int64_t n, float* out) {
  for (std::int64_t t = 0; t < n; ++t) {
    const std::uint16_t* row = table + static_cast<std::int64_t>(tokens[t]) * dim;
    for (std::int64_t i = 0; i < dim; ++i) out[t * dim + i] = f16_to_f32(row[i]);
  }
}

void rms_norm(const float* x, const float* w, float* out, std::int64_t n, std::int64_t d, float eps) {
  ops::rms_norm(x, w, out, n, d, eps);
}

void rope(float* x, const std::int32_t* pos, std::int64_t n, std::int64_t heads, std::int64_t head_dim, float theta, float freq_scale,
          const float* factors, RopeStyle style) {
  std::span<const float> f;  // empty: no llama3 factors
  if (factors) f = std::span<const float>(factors, static_cast<std::size_t>(head_dim / 2));
  for (std::int64_t t = 0; t < n; ++t) ops::rope(x + t * heads * head_dim, heads, head_dim, pos[t], theta, freq_scale, f, style);
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

// One (row, KV head) task: widens each visible K/V row once and serves the group's query heads.
void attention_task(const AttentionArgs& a, int r, int kvh, std::vector<float>& kv_row, std::vector<float>& scores) {
  const int hd = a.head_dim, group = a.num_heads / a.num_kv_heads, ctx = a.row_ctx[r];
  const std::int32_t* table = a.block_tables + static_cast<std::int64_t>(a.row_seq[r]) * a.max_blocks_per_seq;
  // Element offset of position p's row for this KV head in either cache.
  auto row_of = [&](int p) {
    const std::int64_t slot = static_cast<std::int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
    return (slot * a.num_kv_heads + kvh) * hd;
  };
  const float* q = a.q + (static_cast<std::int64_t>(r) * a.num_heads + static_cast<std::int64_t>(kvh) * group) * hd;
  float* out = a.out + (static_cast<std::int64_t>(r) * a.num_heads + static_cast<std::int64_t>(kvh) * group) * hd;
  kv_row.resize(hd);
  scores.resize(static_cast<std::size_t>(group) * ctx);
  for (int p = 0; p < ctx; ++p) {
    const std::uint16_t* k = a.k_cache + row_of(p);
    for (int d = 0; d < hd; ++d) kv_row[d] = f16_to_f32(k[d]);
    for (int g = 0; g < group; ++g) scores[static_cast<std::size_t>(g) * ctx + p] = ops::dot_f32(q + g * hd, kv_row.data(), hd) * a.scale;
  }
  for (int g = 0; g < group; ++g) ops::softmax(scores.data() + static_cast<std::size_t>(g) * ctx, ctx);
  std::fill(out, out + static_cast<std::int64_t>(group) * hd, 0.0f);
  for (int p = 0; p < ctx; ++p) {
    const std::uint16_t* v = a.v_cache + row_of(p);
    for (int d = 0; d < hd; ++d) kv_row[d] = f16_to_f32(v[d]);
    for (int g = 0; g < group; ++g) {
      const float s = scores[static_cast<std::size_t>(g) * ctx + p];
      for (int d = 0; d < hd; ++d) out[g * hd + d] += s * kv_row[d];
    }
  }
}

}  // namespace

void attention(const AttentionArgs& a, ThreadPool& pool) {
  if (a.n_rows <= 0) return;
  const std::int64_t tasks = static_cast<std::int64_t>(a.n_rows) * a.num_kv_heads;
  pool.parallel_for(0, tasks, [&](std::int64_t b, std::int64_t e, int) {
    std::vector<float> kv_row, scores;  // per chunk: reused across its tasks
    for (std::int64_t task = b; task < e; ++task)
      attention_task(a, static_cast<int>(task / a.num_kv_heads), static_cast<int>(task % a.num_kv_heads), kv_row, scores);
  });
}

}  // namespace mo::engine::cpu_dev
