#pragma once
// Op tests of the block ops and attention, written once for every backend (see backend_fixture.h).
// Expected values come from plain double-precision host math in this file, on random inputs.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <type_traits>

#include "backend_fixture.h"
#include "mo/engine/ops/linear.h"

namespace mo::test::block {

// Host RoPE in double: pair i of each head turns by pos * freq_scale * theta^(-2i/hd) / factor[i].
inline double rope_angle(std::int64_t pos, std::int64_t i, std::int64_t hd, double theta, double freq_scale, const float* factors) {
  double a = static_cast<double>(pos) * freq_scale * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
  return factors ? a / factors[i] : a;
}

// One paged-attention case: the KV cache holds poison (large values) in every slot no sequence stores,
// and a prefill row's later positions hold real tokens: reading past a row's context, or a wrong
// slot, moves the result far beyond the tolerance.
struct AttnCase {
  int num_kv_heads, group, head_dim, block_size;
  std::vector<int> seq_len;  // tokens stored per sequence
  std::vector<int> row_seq;  // sequence of each query row
  std::vector<int> row_ctx;  // positions each row attends to
};

}  // namespace mo::test::block

template <class Tag>
class BlockOps : public mo::test::BackendTest<Tag> {
 protected:
  using Case = mo::test::block::AttnCase;

  std::vector<std::uint16_t> random_f16(std::size_t n, float lo, float hi) {
    auto f = this->random_floats(n, lo, hi);
    std::vector<std::uint16_t> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = mo::f32_to_f16(f[i]);
    return h;
  }

  void check_rms_norm(std::int64_t n, std::int64_t d, bool in_place) {
    SCOPED_TRACE("d=" + std::to_string(d) + (in_place ? " in place" : ""));
    const float eps = 1e-5f;
    auto x = this->random_floats(n * d, -3, 3), w = this->random_floats(d, 0.5f, 1.5f);
    auto dx = this->to_device(x), dw = this->to_device(w);
    auto dout = this->zeros(n * d * sizeof(float));
    float* out = in_place ? dx.template as<float>() : dout.template as<float>();
    this->backend().rms_norm(dx.template as<float>(), dw.template as<float>(), out, n, d, eps);
    auto got = this->template to_host<float>(in_place ? dx : dout, n * d);
    for (std::int64_t t = 0; t < n; ++t) {
      double ss = 0;
      for (std::int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[t * d + i]) * x[t * d + i];
      const double scale = 1.0 / std::sqrt(ss / d + eps);
      for (std::int64_t i = 0; i < d; ++i) {
        const double ref = x[t * d + i] * scale * w[i];
        // Tolerance: the scale and two f32 products round (3 ulp ≈ 4e-7 relative), and a device may sum
        // the mean square in f32 in its own order (~1e-6 relative for 4k values): 4e-6 covers both.
        ASSERT_NEAR(got[t * d + i], ref, 4e-6 * std::abs(ref) + 1e-7) << "row " << t << " col " << i;
      }
    }
  }

  void check_rope(std::int64_t head_dim, mo::engine::RopeStyle style, bool llama3) {
    SCOPED_TRACE("head_dim=" + std::to_string(head_dim) + (style == mo::engine::RopeStyle::neox ? " neox" : " normal") +
                 (llama3 ? " llama3" : ""));
    const std::int64_t n = 7, heads = 3, half = head_dim / 2;
    const float theta = llama3 ? 500000.0f : 10000.0f, freq_scale = llama3 ? 1.0f : 0.5f;
    const std::vector<std::int32_t> pos = {0, 1, 17, 255, 1000, 4097, 7999};
    auto x = this->random_floats(n * heads * head_dim, -2, 2);
    auto factors = this->random_floats(half, 1.0f, 8.0f);
    auto dx = this->to_device(x), dpos = this->to_device(pos), df = this->to_device(factors);
    this->backend().rope(dx.template as<float>(), dpos.template as<std::int32_t>(), n, heads, head_dim, theta, freq_scale,
                         llama3 ? df.template as<float>() : nullptr, style);
    auto got = this->template to_host<float>(dx, x.size());
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t i = 0; i < half; ++i) {
          const double ang = mo::test::block::rope_angle(pos[t], i, head_dim, theta, freq_scale, llama3 ? factors.data() : nullptr);
          const bool normal = style == mo::engine::RopeStyle::normal;
          const std::int64_t base = (t * heads + h) * head_dim, a = base + (normal ? 2 * i : i), b = base + (normal ? 2 * i + 1 : i + half);
          const double x0 = x[a], x1 = x[b];
          const double r0 = x0 * std::cos(ang) - x1 * std::sin(ang), r1 = x0 * std::sin(ang) + x1 * std::cos(ang);
          // Tolerance: a device may compute the angle in f32 (a few ulp of the angle, ~3e-7 * |angle| radians)
          // and rotates in f32 (~4e-7 relative): the error is bounded by (|x0| + |x1|) times both.
          const double tol = (std::abs(x0) + std::abs(x1)) * (1e-6 + 1e-6 * std::abs(ang));
          ASSERT_NEAR(got[a], r0, tol) << "token " << t << " head " << h << " pair " << i;
          ASSERT_NEAR(got[b], r1, tol) << "token " << t << " head " << h << " pair " << i;
        }
  }

  // tiled: also pass the per-sequence row ranges (seq_first_row, num_seqs, max_rows_per_seq), which a
  // backend may use to tile a sequence's rows; the case's rows must then be grouped by sequence, in order.
  void check_attention(const Case& c, bool tiled = false) {
    const int nkv = c.num_kv_heads, nh = nkv * c.group, hd = c.head_dim, bs = c.block_size;
    const int num_seqs = static_cast<int>(c.seq_len.size()), n_rows = static_cast<int>(c.row_seq.size());
    SCOPED_TRACE("head_dim=" + std::to_string(hd) + " group=" + std::to_string(c.group) + " block_size=" + std::to_string(bs) +
                 " rows=" + std::to_string(n_rows) + (tiled ? " tiled" : ""));
    // Block tables: every sequence's blocks drawn from one shuffled pool (non-contiguous, out of order);
    // unused table entries point at a poison block.
    int max_blocks = 0, used = 0;
    for (int len : c.seq_len) max_blocks = std::max(max_blocks, (len + bs - 1) / bs + 1);
    for (int len : c.seq_len) used += (len + bs - 1) / bs;
    const int num_blocks = used + 3, poison_block = num_blocks - 1;
    std::vector<int> pool(num_blocks - 1);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), this->rng_);
    std::vector<std::int32_t> tables(static_cast<std::size_t>(num_seqs) * max_blocks, poison_block);
    for (int s = 0, next = 0; s < num_seqs; ++s)
      for (int b = 0; b < (c.seq_len[s] + bs - 1) / bs; ++b) tables[s * max_blocks + b] = pool[next++];
    // Caches: poison everywhere (K large so a stray score dominates, V far outside [-1, 1]), then the
    // sequences' real K/V rows at their slots.
    const std::size_t row = static_cast<std::size_t>(nkv) * hd, cache_elems = static_cast<std::size_t>(num_blocks) * bs * row;
    auto kc = random_f16(cache_elems, 2.0f, 4.0f), vc = random_f16(cache_elems, 50.0f, 100.0f);
    for (int s = 0; s < num_seqs; ++s)
      for (int p = 0; p < c.seq_len[s]; ++p) {
        const std::size_t slot = static_cast<std::size_t>(tables[s * max_blocks + p / bs]) * bs + p % bs;
        auto k = random_f16(row, -1, 1), v = random_f16(row, -1, 1);
        std::copy(k.begin(), k.end(), kc.begin() + slot * row);
        std::copy(v.begin(), v.end(), vc.begin() + slot * row);
      }
    auto q = this->random_floats(static_cast<std::size_t>(n_rows) * nh * hd, -3, 3);
    std::vector<std::int32_t> row_seq(c.row_seq.begin(), c.row_seq.end()), row_ctx(c.row_ctx.begin(), c.row_ctx.end());
    auto dq = this->to_device(q), dk = this->to_device(kc), dv = this->to_device(vc), dt = this->to_device(tables);
    auto drs = this->to_device(row_seq), drc = this->to_device(row_ctx);
    auto dout = this->zeros(q.size() * sizeof(float));
    mo::engine::AttentionArgs a;
    a.q = dq.template as<float>(), a.out = dout.template as<float>();
    a.k_cache = dk.template as<std::uint16_t>(), a.v_cache = dv.template as<std::uint16_t>();
    a.block_tables = dt.template as<std::int32_t>();
    a.row_seq = drs.template as<std::int32_t>(), a.row_ctx = drc.template as<std::int32_t>();
    a.n_rows = n_rows, a.num_heads = nh, a.num_kv_heads = nkv, a.head_dim = hd, a.block_size = bs, a.max_blocks_per_seq = max_blocks;
    a.max_ctx = *std::max_element(row_ctx.begin(), row_ctx.end());
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    std::vector<std::int32_t> first_row(static_cast<std::size_t>(num_seqs) + 1, 0);
    mo::engine::DeviceBuffer dfirst;
    if (tiled) {
      for (int r = 0; r < n_rows; ++r) {
        ASSERT_TRUE(r == 0 || row_seq[r] >= row_seq[r - 1]) << "tiled cases list rows grouped by sequence";
        ++first_row[row_seq[r] + 1];
      }
      a.max_rows_per_seq = *std::max_element(first_row.begin(), first_row.end());
      std::partial_sum(first_row.begin(), first_row.end(), first_row.begin());
      dfirst = this->to_device(first_row);
      a.seq_first_row = dfirst.template as<std::int32_t>();
      a.num_seqs = num_seqs;
    }
    this->backend().attention(a);
    auto got = this->template to_host<float>(dout, q.size());
#if defined(__FMA__)
    if constexpr (std::is_same_v<Tag, mo::test::CpuTag>) {
      // The CPU's plain loops and its AVX2 registers do the same fused multiply-adds in the same order.
      const auto level = mo::ops::simd_level();
      mo::ops::set_simd_level(mo::ops::SimdLevel::scalar);
      auto dplain = this->zeros(q.size() * sizeof(float));
      a.out = dplain.template as<float>();
      this->backend().attention(a);
      mo::ops::set_simd_level(level);
      ASSERT_EQ(this->template to_host<float>(dplain, q.size()), got) << "scalar and SIMD attention differ";
    }
#endif

    for (int r = 0; r < n_rows; ++r) {
      const int s = row_seq[r], ctx = row_ctx[r];
      for (int h = 0; h < nh; ++h) {
        const int kvh = h / c.group;
        // Dense gather of the row's visible K/V through its block table, then softmax in double.
        std::vector<double> keys(static_cast<std::size_t>(ctx) * hd), vals(keys.size()), w(ctx);
        for (int p = 0; p < ctx; ++p) {
          const std::size_t off = (static_cast<std::size_t>(tables[s * max_blocks + p / bs]) * bs + p % bs) * row + kvh * hd;
          for (int d = 0; d < hd; ++d) keys[p * hd + d] = mo::f16_to_f32(kc[off + d]), vals[p * hd + d] = mo::f16_to_f32(vc[off + d]);
        }
        const float* qh = &q[(static_cast<std::size_t>(r) * nh + h) * hd];
        double mx = -1e300, sum = 0;
        for (int p = 0; p < ctx; ++p) {
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += qh[d] * keys[p * hd + d];
          w[p] = dot * a.scale;
          mx = std::max(mx, w[p]);
        }
        for (int p = 0; p < ctx; ++p) sum += (w[p] = std::exp(w[p] - mx));
        for (int d = 0; d < hd; ++d) {
          double ref = 0;
          for (int p = 0; p < ctx; ++p) ref += w[p] / sum * vals[p * hd + d];
          // Tolerance: f32 scores (a dot of up to 256 terms, <~1e-5 absolute even in the worst order) and
          // f32 online-softmax sums in the device's order give errors ~1e-6 on outputs within [-1, 1];
          // 1e-4 leaves room yet fails on any stray (poison) slot or a position outside the context.
          ASSERT_NEAR(got[(static_cast<std::size_t>(r) * nh + h) * hd + d], ref, 1e-4) << "row " << r << " head " << h << " dim " << d;
        }
      }
    }
  }

  // Decode: 5 sequences of different lengths, one query row each, rows in a different order.
  static Case decode(int nkv, int group, int hd, int bs) {
    Case c{nkv, group, hd, bs, {333, 1, 700, 17, 64}, {2, 4, 0, 1, 3}, {}};
    for (int s : c.row_seq) c.row_ctx.push_back(c.seq_len[s]);
    return c;
  }
  // Ragged prefill: 40 new rows of sequence 1 after `start` cached tokens, row i sees start + i + 1.
  static Case prefill(int nkv, int group, int hd, int bs, int start = 250) {
    Case c{nkv, group, hd, bs, {90, start + 40}, std::vector<int>(40, 1), {}};
    for (int i = 0; i < 40; ++i) c.row_ctx.push_back(start + i + 1);
    return c;
  }
  // Ragged prefill batch: sequence s has start[s] cached tokens and rows[s] new rows (row i sees
  // start[s] + i + 1 positions); the rows are listed sequence by sequence, as the tiled path needs.
  static Case ragged(int nkv, int group, int hd, int bs, const std::vector<int>& start, const std::vector<int>& rows) {
    Case c{nkv, group, hd, bs, {}, {}, {}};
    for (std::size_t s = 0; s < rows.size(); ++s) {
      c.seq_len.push_back(start[s] + rows[s]);
      for (int i = 0; i < rows[s]; ++i) c.row_seq.push_back(static_cast<int>(s)), c.row_ctx.push_back(start[s] + i + 1);
    }
    return c;
  }
};
TYPED_TEST_SUITE_P(BlockOps);

// f32 addition is exact on every device: the result must equal the host sum bit for bit.
TYPED_TEST_P(BlockOps, AddIsExact) {
  const std::size_t n = 100003;  // not a multiple of any block size
  auto x = this->random_floats(n, -10, 10), y = this->random_floats(n, -10, 10);
  auto dx = this->to_device(x), dy = this->to_device(y);
  this->backend().add(dx.template as<float>(), dy.template as<float>(), static_cast<std::int64_t>(n));
  auto got = this->template to_host<float>(dx, n);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], x[i] + y[i]) << "at " << i;
}

// f16 -> f32 is exact: each output row equals its token's table row widened, bit for bit.
TYPED_TEST_P(BlockOps, EmbeddingGathersRowsExactly) {
  const std::int64_t vocab = 50, dim = 96, n = 17;
  auto table = this->random_f16(vocab * dim, -2, 2);
  std::vector<std::int32_t> tokens(n);
  for (std::int64_t t = 0; t < n; ++t) tokens[t] = static_cast<std::int32_t>(this->rng_() % vocab);
  tokens[0] = vocab - 1, tokens[1] = tokens[2];  // the last row and a repeated token
  auto dtab = this->to_device(table), dtok = this->to_device(tokens);
  auto dout = this->zeros(n * dim * sizeof(float));
  this->backend().embedding(dtab.template as<std::uint16_t>(), dim, dtok.template as<std::int32_t>(), n, dout.template as<float>());
  auto got = this->template to_host<float>(dout, n * dim);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < dim; ++i) ASSERT_EQ(got[t * dim + i], mo::f16_to_f32(table[tokens[t] * dim + i])) << t << "," << i;
}

TYPED_TEST_P(BlockOps, RmsNormMatchesHost) {
  this->check_rms_norm(5, 64, false);
  this->check_rms_norm(3, 4097, false);  // longer than any block, not a multiple of a warp
  this->check_rms_norm(3, 4097, true);   // out aliases x
}

TYPED_TEST_P(BlockOps, RopeNormalMatchesHost) {
  for (std::int64_t hd : {8, 64, 128}) this->check_rope(hd, mo::engine::RopeStyle::normal, false);
}

TYPED_TEST_P(BlockOps, RopeNeoxMatchesHost) {
  for (std::int64_t hd : {8, 64, 128}) this->check_rope(hd, mo::engine::RopeStyle::neox, false);
}

TYPED_TEST_P(BlockOps, RopeLlama3FactorsMatchHost) {
  for (std::int64_t hd : {8, 64, 128}) {
    this->check_rope(hd, mo::engine::RopeStyle::normal, true);
    this->check_rope(hd, mo::engine::RopeStyle::neox, true);
  }
}

TYPED_TEST_P(BlockOps, SiluMulMatchesHost) {
  const std::int64_t n = 10007;
  auto gate = this->random_floats(n, -8, 8), up = this->random_floats(n, -2, 2);
  auto dg = this->to_device(gate), du = this->to_device(up);
  this->backend().silu_mul(dg.template as<float>(), du.template as<float>(), n);
  auto got = this->template to_host<float>(dg, n);
  for (std::int64_t i = 0; i < n; ++i) {
    const double g = gate[i], ref = g / (1.0 + std::exp(-g)) * up[i];
    // Tolerance: f32 exp (<= 2 ulp), one add, one divide and one multiply: ~5 ulp ≈ 6e-7 relative.
    ASSERT_NEAR(got[i], ref, 2e-6 * std::abs(ref) + 1e-30) << "at " << i;
  }
}

// One f32 addition per element: exact on every device.
TYPED_TEST_P(BlockOps, AddBiasIsExact) {
  const std::int64_t n = 9, d = 1031;
  auto y = this->random_floats(n * d, -5, 5), bias = this->random_floats(d, -5, 5);
  auto dy = this->to_device(y), db = this->to_device(bias);
  this->backend().add_bias(dy.template as<float>(), db.template as<float>(), n, d);
  auto got = this->template to_host<float>(dy, n * d);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < d; ++i) ASSERT_EQ(got[t * d + i], y[t * d + i] + bias[i]) << t << "," << i;
}

// diagnose undoes AWQ's per-channel scales with it: one f32 product per element, exact.
TYPED_TEST_P(BlockOps, ScaleColumnsIsExact) {
  const std::int64_t n = 7, d = 1029;
  auto y = this->random_floats(n * d, -5, 5), s = this->random_floats(d, -3, 3);
  auto dy = this->to_device(y), ds = this->to_device(s);
  this->backend().scale_columns(dy.template as<float>(), ds.template as<float>(), n, d);
  auto got = this->template to_host<float>(dy, n * d);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < d; ++i) ASSERT_EQ(got[t * d + i], y[t * d + i] * s[i]) << t << "," << i;
}

// The quantizers' f32 self-attention weights: row i is the softmax of columns 0..i (host math in f64), and
// exactly 0 past i, in a row of ld >= n floats whose tail is left alone.
TYPED_TEST_P(BlockOps, CausalSoftmaxMatchesHost) {
  const std::int64_t n = 300, ld = 307;
  auto s = this->random_floats(n * ld, -30, 30);
  auto ds = this->to_device(s);
  this->backend().causal_softmax(ds.template as<float>(), n, ld);
  auto got = this->template to_host<float>(ds, n * ld);
  for (std::int64_t i = 0; i < n; ++i) {
    double m = -1e300, sum = 0;
    for (std::int64_t j = 0; j <= i; ++j) m = std::max<double>(m, s[i * ld + j]);
    for (std::int64_t j = 0; j <= i; ++j) sum += std::exp(static_cast<double>(s[i * ld + j]) - m);
    for (std::int64_t j = 0; j <= i; ++j)
      ASSERT_NEAR(got[i * ld + j], std::exp(static_cast<double>(s[i * ld + j]) - m) / sum, 1e-6) << i << "," << j;
    for (std::int64_t j = i + 1; j < n; ++j) ASSERT_EQ(got[i * ld + j], 0.0f) << i << "," << j;
    for (std::int64_t j = n; j < ld; ++j) ASSERT_EQ(got[i * ld + j], s[i * ld + j]) << i << "," << j;
  }
}

// Tokens land at slots scattered over shuffled blocks as f16 bits equal to mo::f32_to_f16 (round to
// nearest even, ties and subnormals included); every other slot keeps its old bits.
TYPED_TEST_P(BlockOps, KvWriteScattersRoundedRows) {
  const std::int64_t num_blocks = 12, bs = 16, row = 2 * 64, n = 37;
  std::vector<int> blocks(num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), this->rng_);
  std::vector<std::int32_t> slots(n);
  for (std::int64_t t = 0; t < n; ++t) slots[t] = static_cast<std::int32_t>(blocks[(t + 5) / bs] * bs + (t + 5) % bs);
  auto k = this->random_floats(n * row, -70000, 70000), v = this->random_floats(n * row, -1, 1);
  const float specials[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -2.0f - 0x1p-10f, 3e-6f, -4.5e-8f, 65519.0f, 65520.0f, 0.0f, -0.0f};
  for (std::size_t i = 0; i < std::size(specials); ++i) k[i] = v[i + 3] = specials[i];  // ties to even, subnormals, overflow
  for (std::int64_t i = 0; i < 200; ++i) v[200 + i] = std::ldexp(v[200 + i], -14);      // the f16 subnormal range
  const std::size_t cache = static_cast<std::size_t>(num_blocks * bs * row);
  auto kc = this->random_f16(cache, -1, 1), vc = this->random_f16(cache, -1, 1);
  auto dkc = this->to_device(kc), dvc = this->to_device(vc), dk = this->to_device(k), dv = this->to_device(v), ds = this->to_device(slots);
  this->backend().kv_write(dkc.template as<std::uint16_t>(), dvc.template as<std::uint16_t>(), dk.template as<float>(),
                           dv.template as<float>(), ds.template as<std::int32_t>(), n, row);
  auto gk = this->template to_host<std::uint16_t>(dkc, cache), gv = this->template to_host<std::uint16_t>(dvc, cache);
  auto ek = kc, ev = vc;
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < row; ++i) {
      ek[slots[t] * row + i] = mo::f32_to_f16(k[t * row + i]);
      ev[slots[t] * row + i] = mo::f32_to_f16(v[t * row + i]);
    }
  for (std::size_t i = 0; i < cache; ++i) {
    ASSERT_EQ(gk[i], ek[i]) << "K element " << i << " (slot " << i / row << ")";
    ASSERT_EQ(gv[i], ev[i]) << "V element " << i << " (slot " << i / row << ")";
  }
}

TYPED_TEST_P(BlockOps, AttentionDecodeMatchesDenseHost) {
  this->check_attention(this->decode(2, 1, 8, 16));  // the tiny test model's head_dim
  this->check_attention(this->decode(2, 4, 8, 32));
  this->check_attention(this->decode(3, 1, 64, 32));  // SmolLM2
  this->check_attention(this->decode(2, 4, 64, 16));
  this->check_attention(this->decode(1, 4, 128, 16));  // Llama
  this->check_attention(this->decode(2, 1, 128, 32));
}

TYPED_TEST_P(BlockOps, AttentionPrefillMatchesDenseHost) {
  this->check_attention(this->prefill(2, 4, 8, 16));
  this->check_attention(this->prefill(2, 1, 64, 32));
  this->check_attention(this->prefill(1, 4, 64, 16, 0));  // the first chunk: row i sees i + 1 positions
  this->check_attention(this->prefill(2, 4, 128, 32));
  this->check_attention(this->prefill(1, 1, 128, 16));
}

// Head sizes off the common path (not a power of two, the largest) and the widest GQA groups.
TYPED_TEST_P(BlockOps, AttentionOtherShapesMatchDenseHost) {
  this->check_attention(this->decode(1, 8, 256, 16));
  this->check_attention(this->decode(2, 3, 96, 16));
  this->check_attention(this->prefill(1, 6, 80, 32, 100));
  this->check_attention(this->decode(1, 2, 24, 16));
}

// One long context: the kernels hold no per-position state, so 20k positions work like 20.
TYPED_TEST_P(BlockOps, AttentionLongContextMatchesDenseHost) {
  typename TestFixture::Case c{2, 4, 128, 32, {20000}, {0}, {20000}};
  this->check_attention(c);
}

// A ragged prefill batch with per-sequence row ranges (the tiled prefill kernel on a GPU): sequences of
// 1, 17, 40 and 100 new rows after different cached prefixes (one of 0 rows: a sequence only cached),
// so tiles end mid-sequence, short sequences share the launch with long ones and rows see different
// contexts within a tile. The tolerance is check_attention's (f32 scores and online softmax, ~1e-6).
TYPED_TEST_P(BlockOps, AttentionTiledPrefillRaggedBatchMatchesDenseHost) {
  const std::vector<int> start = {5, 0, 77, 33, 250}, rows = {1, 17, 0, 40, 100};
  this->check_attention(this->ragged(2, 1, 64, 16, start, rows), true);
  this->check_attention(this->ragged(2, 4, 64, 32, start, rows), true);
  this->check_attention(this->ragged(1, 4, 128, 16, start, rows), true);
  this->check_attention(this->ragged(2, 1, 128, 32, start, rows), true);
}

// The tiled path's other shapes: head sizes off the fast path (not a multiple of 4, the smallest, the
// largest with its opt-in shared memory), the widest GQA groups, tiles that do not divide the rows.
TYPED_TEST_P(BlockOps, AttentionTiledPrefillOtherShapesMatchDenseHost) {
  this->check_attention(this->ragged(1, 8, 256, 16, {3, 20}, {9, 17}), true);
  this->check_attention(this->ragged(1, 3, 18, 16, {3, 40}, {9, 23}), true);
  this->check_attention(this->ragged(1, 6, 80, 32, {100, 0}, {21, 16}), true);
  this->check_attention(this->ragged(2, 2, 8, 16, {0, 10}, {20, 5}), true);
  this->check_attention(this->ragged(1, 7, 96, 32, {31, 64, 0}, {3, 16, 33}), true);
}

REGISTER_TYPED_TEST_SUITE_P(BlockOps, AddIsExact, EmbeddingGathersRowsExactly, RmsNormMatchesHost, RopeNormalMatchesHost,
                            RopeNeoxMatchesHost, RopeLlama3FactorsMatchHost, SiluMulMatchesHost, AddBiasIsExact, ScaleColumnsIsExact,
                            CausalSoftmaxMatchesHost, KvWriteScattersRoundedRows, AttentionDecodeMatchesDenseHost,
                            AttentionPrefillMatchesDenseHost, AttentionOtherShapesMatchDenseHost, AttentionLongContextMatchesDenseHost,
                            AttentionTiledPrefillRaggedBatchMatchesDenseHost, AttentionTiledPrefillOtherShapesMatchDenseHost);
