#pragma once
// Op tests of the quantization ops (GEMM, GPTQ's Hessian update, Cholesky factor of the inverse and
// column sweep, AWQ's quantize-dequantize, output-error sums), written once for every backend (see
// backend_fixture.h). Expected values come from plain double-precision host math in this file, with its
// own copy of the group-parameter rule (GPTQ's find_params), on random inputs.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backend_fixture.h"
#include "mo/quant/awq.h"
#include "mo/quant/gptq.h"

namespace mo::test::quant_ref {

struct Params {
  std::uint16_t scale = 0;
  int zero = 0;
};

// GPTQ's find_params with the scale stored as f16 (an independent copy of formats/group_params.h).
inline Params params(const std::vector<float>& v, int bits, bool sym) {
  const int maxq = (1 << bits) - 1;
  float lo = 0, hi = 0;
  for (float x : v) lo = std::min(lo, x), hi = std::max(hi, x);
  if (sym) hi = std::max(hi, -lo), lo = -hi;
  if (lo == 0 && hi == 0) lo = -1, hi = 1;
  Params p;
  p.scale = f32_to_f16((hi - lo) / static_cast<float>(maxq));
  p.zero = sym ? (maxq + 1) / 2 : static_cast<int>(std::clamp(std::nearbyint(-lo / f16_to_f32(p.scale)), 0.0f, static_cast<float>(maxq)));
  return p;
}
inline int code(float w, const Params& p, int bits) {
  const float q = std::nearbyint(w / f16_to_f32(p.scale)) + static_cast<float>(p.zero);
  return static_cast<int>(std::clamp(q, 0.0f, static_cast<float>((1 << bits) - 1)));
}
inline float deq(int q, const Params& p) { return static_cast<float>(q - p.zero) * f16_to_f32(p.scale); }

}  // namespace mo::test::quant_ref

// The CPU backend against itself runs the very same arithmetic (only its thread count differs), so the
// whole-layer comparisons below must agree exactly there; another device may order its sums differently.
template <class Tag>
inline constexpr bool kSameArithmetic = std::is_same_v<Tag, mo::test::CpuTag>;

template <class Tag>
class QuantOps : public mo::test::BackendTest<Tag> {
 protected:
  // A random symmetric positive definite matrix M·Mᵀ/k + 0.1·I (k = 2n), row-major f64.
  std::vector<double> random_spd(std::int64_t n) {
    const std::int64_t k = 2 * n;
    auto m = this->random_floats(n * k);
    std::vector<double> a(n * n);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t t = 0; t < k; ++t) s += static_cast<double>(m[i * k + t]) * m[j * k + t];
        a[i * n + j] = s / k + (i == j ? 0.1 : 0.0);
      }
    return a;
  }

  void check_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k) {
    SCOPED_TRACE(std::string(ta ? "T" : "N") + (tb ? "T" : "N") + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                 std::to_string(k));
    // Leading dimensions wider than the matrices, as GPTQ's block updates use them.
    const std::int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
    auto a = this->random_floats((ta ? k : m) * lda), b = this->random_floats((tb ? n : k) * ldb), c = this->random_floats(m * ldc);
    auto da = this->to_device(a), db = this->to_device(b), dc = this->to_device(c);
    const float alpha = -0.75f, beta = 0.5f;
    this->backend().gemm(ta, tb, m, n, k, alpha, da.template as<float>(), lda, db.template as<float>(), ldb, beta, dc.template as<float>(),
                         ldc);
    auto got = this->template to_host<float>(dc, c.size());
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < ldc; ++j) {
        if (j >= n) {
          ASSERT_EQ(got[i * ldc + j], c[i * ldc + j]) << "wrote past n at " << i << "," << j;
          continue;
        }
        double s = 0;
        for (std::int64_t t = 0; t < k; ++t) {
          const double x = ta ? a[t * lda + i] : a[i * lda + t];
          const double y = tb ? b[j * ldb + t] : b[t * ldb + j];
          s += x * y;
        }
        const double ref = alpha * s + beta * c[i * ldc + j];
        ASSERT_NEAR(got[i * ldc + j], ref, 1e-5 * (1 + std::sqrt(static_cast<double>(k)))) << i << "," << j;
      }
  }
};

TYPED_TEST_SUITE_P(QuantOps);

TYPED_TEST_P(QuantOps, GemmMatchesHostInEveryTransposeCombination) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) this->check_gemm(ta, tb, 37, 29, 70);
  this->check_gemm(false, false, 1, 300, 5);
}

// Two batches fold into the running mean 2/N · Σ x xᵀ over all N tokens, symmetric.
TYPED_TEST_P(QuantOps, HessianUpdateIsTheRunningMeanOfTwoXxt) {
  const std::int64_t d = 45, n1 = 17, n2 = 60;
  auto x = this->random_floats((n1 + n2) * d, -2, 2);
  auto dh = this->zeros(d * d * sizeof(double));
  auto dx = this->to_device(x);
  this->backend().hessian_update(dh.template as<double>(), dx.template as<float>(), n1, d, 0);
  this->backend().hessian_update(dh.template as<double>(), dx.template as<float>() + n1 * d, n2, d, n1);
  auto h = this->template to_host<double>(dh, d * d);
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j) {
      double s = 0;
      for (std::int64_t t = 0; t < n1 + n2; ++t) s += static_cast<double>(x[t * d + i]) * x[t * d + j];
      const double ref = 2.0 * s / static_cast<double>(n1 + n2);
      ASSERT_NEAR(h[i * d + j], ref, 1e-5 * (1 + std::fabs(ref))) << i << "," << j;
      ASSERT_EQ(h[i * d + j], h[j * d + i]) << "not symmetric at " << i << "," << j;
    }
}

// UᵀU must be A⁻¹: U·A·Uᵀ... checked as (UᵀU)·A = I, U upper with a positive diagonal.
TYPED_TEST_P(QuantOps, InverseCholeskyUpperFactorsTheInverse) {
  for (std::int64_t n : {1, 7, 64, 130}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto a = this->random_spd(n);
    auto da = this->to_device(a);
    auto du = this->zeros(n * n * sizeof(float));
    ASSERT_TRUE(this->backend().inverse_cholesky_upper(da.template as<double>(), n, du.template as<float>()));
    auto u = this->template to_host<float>(du, n * n);
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_GT(u[i * n + i], 0.0f);
      for (std::int64_t j = 0; j < i; ++j) ASSERT_EQ(u[i * n + j], 0.0f) << "lower triangle at " << i << "," << j;
    }
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;  // ((UᵀU) A)_ij = Σ_k (UᵀU)_ik A_kj
        for (std::int64_t k = 0; k < n; ++k) {
          double inv = 0;
          for (std::int64_t t = 0; t <= std::min(i, k); ++t) inv += static_cast<double>(u[t * n + i]) * u[t * n + k];
          s += inv * a[k * n + j];
        }
        ASSERT_NEAR(s, i == j ? 1.0 : 0.0, 2e-4) << i << "," << j;
      }
  }
}

TYPED_TEST_P(QuantOps, InverseCholeskyUpperRefusesAMatrixThatIsNotPositiveDefinite) {
  const std::int64_t n = 5;
  auto a = this->random_spd(n);
  a[2 * n + 2] = -1.0;
  auto da = this->to_device(a);
  auto du = this->zeros(n * n * sizeof(float));
  EXPECT_FALSE(this->backend().inverse_cholesky_upper(da.template as<double>(), n, du.template as<float>()));
}

// One block with two dynamic groups (params from the columns before the sweep) and one fixed set:
// codes, errors, params and losses as GPTQ's per-column loop computes them on the host.
TYPED_TEST_P(QuantOps, GptqBlockSweepsColumnsAsTheHostLoop) {
  namespace ref = mo::test::quant_ref;
  for (const bool sym : {true, false}) {
    SCOPED_TRACE(sym ? "sym" : "asym");
    const std::int64_t rows = 33, count = 20, ldu = count + 4;
    const int bits = 4;
    auto w = this->random_floats(count * rows, -1, 1);
    std::vector<float> u(count * ldu, 0.0f);
    for (std::int64_t i = 0; i < count; ++i)
      for (std::int64_t j = i; j < count; ++j) u[i * ldu + j] = i == j ? 0.5f + 0.05f * i : 0.1f * std::sin(float(i * 7 + j));
    // Set 0: dynamic, columns 0..7; set 1: dynamic, columns 8..15; set 2: fixed, columns 16..19.
    std::vector<std::int32_t> set(count), start(count, 0);
    for (std::int64_t i = 0; i < count; ++i) set[i] = i < 8 ? 0 : i < 16 ? 1 : 2;
    start[0] = 8, start[8] = 8;
    std::vector<std::uint16_t> scales(3 * rows, 0);
    std::vector<std::int32_t> zeros(3 * rows, 0);
    std::vector<ref::Params> fixed(rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      fixed[r] = ref::params({-0.9f - 0.01f * r, 0.8f}, bits, sym);
      scales[2 * rows + r] = fixed[r].scale, zeros[2 * rows + r] = fixed[r].zero;
    }
    auto dw = this->to_device(w), dstart_w = this->to_device(w), du = this->to_device(u), dset = this->to_device(set),
         dstart = this->to_device(start), dsc = this->to_device(scales), dze = this->to_device(zeros);
    auto derr = this->zeros(count * rows * sizeof(float)), dcodes = this->zeros(count * rows), dloss = this->zeros(rows * sizeof(double));
    mo::engine::GptqBlockArgs a;
    a.w = dw.template as<float>(), a.w_start = dstart_w.template as<float>(), a.u = du.template as<float>(), a.ldu = ldu;
    a.err = derr.template as<float>(), a.codes = dcodes.template as<std::uint8_t>();
    a.scales = dsc.template as<std::uint16_t>(), a.zeros = dze.template as<std::int32_t>();
    a.param_set = dset.template as<std::int32_t>(), a.group_start = dstart.template as<std::int32_t>();
    a.loss = dloss.template as<double>(), a.rows = rows, a.count = count, a.bits = bits, a.sym = sym;
    this->backend().gptq_block(a);
    auto err = this->template to_host<float>(derr, count * rows);
    auto codes = this->template to_host<std::uint8_t>(dcodes, count * rows);
    auto got_sc = this->template to_host<std::uint16_t>(dsc, 3 * rows);
    auto got_ze = this->template to_host<std::int32_t>(dze, 3 * rows);
    auto loss = this->template to_host<double>(dloss, rows);

    int code_diffs = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      std::vector<double> wr(count);
      for (std::int64_t i = 0; i < count; ++i) wr[i] = w[i * rows + r];
      ref::Params p[3] = {{}, {}, fixed[r]};
      for (int g = 0; g < 2; ++g) {
        std::vector<float> v;
        for (std::int64_t i = 8 * g; i < 8 * g + 8; ++i) v.push_back(w[i * rows + r]);
        p[g] = ref::params(v, bits, sym);
        ASSERT_EQ(got_sc[g * rows + r], p[g].scale) << "row " << r << " group " << g;
        ASSERT_EQ(got_ze[g * rows + r], p[g].zero) << "row " << r << " group " << g;
      }
      double l = 0;
      for (std::int64_t i = 0; i < count; ++i) {
        const ref::Params& pi = p[set[i]];
        const int q = ref::code(static_cast<float>(wr[i]), pi, bits);
        code_diffs += q != codes[i * rows + r];
        const double e = (wr[i] - ref::deq(q, pi)) / u[i * ldu + i];
        ASSERT_NEAR(err[i * rows + r], e, 1e-4) << "row " << r << " col " << i;
        l += e * e;
        for (std::int64_t j = i + 1; j < count; ++j) wr[j] -= static_cast<double>(u[i * ldu + j]) * err[i * rows + r];
      }
      ASSERT_NEAR(loss[r], l, 1e-4 * (1 + l)) << "row " << r;
    }
    // f32 on the device vs f64 here: a weight on a rounding boundary may round the other way.
    EXPECT_LE(code_diffs, 2) << "of " << count * rows;
  }
}

TYPED_TEST_P(QuantOps, FakeQuantizeIsTheGroupReconstruction) {
  namespace ref = mo::test::quant_ref;
  const std::int64_t rows = 7, cols = 45, group = 16;  // the last group has 13 columns
  for (const auto& [bits, sym] : {std::pair{4, false}, std::pair{8, true}, std::pair{4, true}}) {
    SCOPED_TRACE(std::to_string(bits) + (sym ? " sym" : " asym"));
    auto w = this->random_floats(rows * cols, -2, 1);
    std::fill_n(w.begin() + 16, 16, 0.0f);  // an all-zero group
    auto dw = this->to_device(w);
    this->backend().fake_quantize(dw.template as<float>(), rows, cols, group, bits, sym);
    auto got = this->template to_host<float>(dw, w.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c0 = 0; c0 < cols; c0 += group) {
        const std::vector<float> v(w.begin() + r * cols + c0, w.begin() + r * cols + std::min(cols, c0 + group));
        const ref::Params p = ref::params(v, bits, sym);
        for (std::size_t i = 0; i < v.size(); ++i)
          ASSERT_EQ(got[r * cols + c0 + i], ref::deq(ref::code(v[i], p, bits), p)) << r << "," << c0 + i;
      }
  }
}

TYPED_TEST_P(QuantOps, ErrorSumsMatchHost) {
  const std::int64_t n = 100003;
  auto a = this->random_floats(n, -3, 3), b = this->random_floats(n, -3, 3);
  auto da = this->to_device(a), db = this->to_device(b);
  const mo::engine::ErrorSums s = this->backend().error_sums(da.template as<float>(), db.template as<float>(), n);
  double ab = 0, aa = 0, bb = 0, dd = 0, mx = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    ab += x * y, aa += x * x, bb += y * y, dd += (x - y) * (x - y), mx = std::max(mx, std::fabs(x - y));
  }
  EXPECT_NEAR(s.ab, ab, 1e-9 * aa);
  EXPECT_NEAR(s.aa, aa, 1e-9 * aa);
  EXPECT_NEAR(s.bb, bb, 1e-9 * bb);
  EXPECT_NEAR(s.dd, dd, 1e-9 * dd);
  EXPECT_EQ(s.max_abs, mx);
  const auto empty = this->backend().error_sums(da.template as<float>(), db.template as<float>(), 0);
  EXPECT_EQ(empty.aa, 0.0);
}

// AWQ's candidate weight error, against independent host math: a column-scaled search candidate and a
// row-clipped one read from a sub-block (leading dimension wider than the block).
TYPED_TEST_P(QuantOps, QuantizeDeltaIsTheScaledClippedReconstructionMinusTheWeight) {
  namespace ref = mo::test::quant_ref;
  const std::int64_t rows = 5, ld = 60, c_first = 7, cols = 45, group = 16;
  auto w = this->random_floats(rows * ld, -2, 1);
  auto s = this->random_floats(cols, 0.25, 4);
  auto clip = this->random_floats(rows, 0.2, 1.5);
  auto dw = this->to_device(w), ds = this->to_device(s), dc = this->to_device(clip);
  mo::engine::DeviceBuffer dd(this->backend(), static_cast<std::size_t>(rows * cols) * sizeof(float));
  for (const bool scaled : {true, false}) {
    SCOPED_TRACE(scaled ? "column scales" : "row clips");
    this->backend().quantize_delta(dw.template as<float>() + c_first, ld, rows, cols, scaled ? ds.template as<float>() : nullptr,
                                   scaled ? nullptr : dc.template as<float>(), group, 4, false, dd.template as<float>());
    auto got = this->template to_host<float>(dd, static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c0 = 0; c0 < cols; c0 += group) {
        std::vector<float> v;
        for (std::int64_t c = c0; c < std::min(cols, c0 + group); ++c) {
          const float x = w[r * ld + c_first + c];
          v.push_back(scaled ? x * s[c] : std::min(std::max(x, -clip[r]), clip[r]));
        }
        const ref::Params p = ref::params(v, 4, false);
        for (std::size_t i = 0; i < v.size(); ++i) {
          const std::int64_t c = c0 + static_cast<std::int64_t>(i);
          const float q = ref::deq(ref::code(v[i], p, 4), p);
          ASSERT_EQ(got[r * cols + c], (scaled ? q / s[c] : q) - w[r * ld + c_first + c]) << r << "," << c;
        }
      }
  }
}

TYPED_TEST_P(QuantOps, RowDotsAreThePerRowSums) {
  const std::int64_t rows = 37, cols = 1001;
  auto a = this->random_floats(rows * cols, -3, 3), b = this->random_floats(rows * cols, -3, 3);
  auto da = this->to_device(a), db = this->to_device(b);
  std::vector<double> got(rows);
  this->backend().row_dots(da.template as<float>(), db.template as<float>(), rows, cols, got.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    double want = 0, mag = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      want += static_cast<double>(a[r * cols + c]) * b[r * cols + c], mag += std::fabs(a[r * cols + c] * b[r * cols + c]);
    EXPECT_NEAR(got[r], want, 1e-12 * mag) << r;
  }
}

// AWQ's whole layer transform (scale search and clipping) scored on this backend against the CPU
// backend: the same ratios, and weights equal but where float order flips a near-tie.
TYPED_TEST_P(QuantOps, AwqOnThisBackendChoosesTheCpuBackendsScales) {
  const std::int64_t hidden = 64, ffn = 160, tokens = 300;
  mo::quant::LayerF32 layer;
  layer.hidden = layer.q_dim = layer.kv_dim = hidden;
  layer.ffn = ffn;
  layer.attn_norm = this->random_floats(hidden, 0.5f, 1.5f);
  layer.ffn_norm = this->random_floats(hidden, 0.5f, 1.5f);
  for (mo::engine::LinearId id : mo::quant::kAllLinears)
    layer.weight(id) = this->random_floats(layer.rows(id) * layer.cols(id), -0.2f, 0.2f);
  mo::quant::LayerInputs in;
  in.n = tokens;
  for (auto* v : {&in.attn_in, &in.o_in, &in.mlp_in}) *v = this->random_floats(tokens * hidden, -1, 1);
  in.down_in = this->random_floats(tokens * ffn, -1, 1);
  for (std::int64_t t = 0; t < tokens; ++t) in.attn_in[t * hidden + 3] *= 20.0f;  // an outlier channel for the search to protect
  mo::ThreadPool pool(1);
  const auto cpu = mo::engine::make_cpu_backend(pool);
  const mo::formats::QuantScheme scheme{4, 32, false};
  const bool skip[7] = {};
  auto a_layer = layer, b_layer = layer;
  auto a_in = in, b_in = in;
  const auto a = mo::quant::awq_transform_layer(a_layer, a_in, scheme, mo::quant::AwqOptions{}, skip, *cpu);
  const auto b = mo::quant::awq_transform_layer(b_layer, b_in, scheme, mo::quant::AwqOptions{}, skip, this->backend());
  ASSERT_EQ(a.groups.size(), b.groups.size());
  for (std::size_t i = 0; i < a.groups.size(); ++i) {
    EXPECT_EQ(a.groups[i].ratio, b.groups[i].ratio) << a.groups[i].name;
    EXPECT_NEAR(a.groups[i].error_best, b.groups[i].error_best, 1e-4 * a.groups[i].error_best) << a.groups[i].name;
  }
  EXPECT_NEAR(a.clip_error_after, b.clip_error_after, 1e-3 * a.clip_error_after);
  std::size_t same = 0, all = 0;
  for (mo::engine::LinearId id : mo::quant::kAllLinears)
    for (std::size_t i = 0; i < a_layer.weight(id).size(); ++i, ++all) same += a_layer.weight(id)[i] == b_layer.weight(id)[i];
  if constexpr (kSameArithmetic<TypeParam>) {
    EXPECT_EQ(same, all);
    for (std::size_t i = 0; i < a.groups.size(); ++i) EXPECT_EQ(a.groups[i].error_best, b.groups[i].error_best) << a.groups[i].name;
    EXPECT_EQ(a.clip_error_after, b.clip_error_after);
  } else {
    EXPECT_GE(static_cast<double>(same), 0.99 * static_cast<double>(all));
  }
}

// The whole GPTQ solve over this backend's ops against the same solve on the CPU backend: the codes the
// two write may differ only where float order puts a weight on the other side of a rounding boundary.
TYPED_TEST_P(QuantOps, GptqOnThisBackendWritesTheCpuBackendsCodes) {
  const std::int64_t rows = 96, cols = 300, tokens = 700;
  auto x = this->random_floats(tokens * cols, -1, 1);
  for (std::int64_t t = 0; t < tokens; ++t)  // correlated channels, as real activations are
    for (std::int64_t c = 1; c < cols; ++c) x[t * cols + c] = 0.6f * x[t * cols + c - 1] + 0.4f * x[t * cols + c];
  for (std::int64_t t = 0; t < tokens; ++t) x[t * cols + 5] = 0.0f;  // a dead column
  const auto w = this->random_floats(rows * cols, -0.1f, 0.1f);
  mo::ThreadPool pool(1);
  const auto cpu = mo::engine::make_cpu_backend(pool);
  for (const auto& [group, desc_act] : {std::pair{128, true}, std::pair{32, false}, std::pair{-1, false}}) {
    SCOPED_TRACE("group " + std::to_string(group) + (desc_act ? " act-order" : ""));
    mo::quant::GptqOptions o;
    o.desc_act = desc_act;
    o.static_groups = desc_act;
    const mo::formats::QuantScheme scheme{4, group, true};
    mo::quant::HessianAccumulator h_cpu(*cpu, cols), h_dev(this->backend(), cols);
    // The same two batches on both, so that the CPU backend against itself sees the same sums.
    h_cpu.add(x.data(), 300);
    h_cpu.add(x.data() + 300 * cols, tokens - 300);
    h_dev.add_host(x.data(), 300);
    h_dev.add_host(x.data() + 300 * cols, tokens - 300);
    const auto a = mo::quant::gptq_quantize(w.data(), rows, cols, h_cpu, scheme, o);
    const auto b = mo::quant::gptq_quantize(w.data(), rows, cols, h_dev, scheme, o);
    EXPECT_EQ(b.dead_columns, 1);
    EXPECT_EQ(a.q.g_idx, b.q.g_idx);
    if constexpr (kSameArithmetic<TypeParam>) {
      EXPECT_EQ(a.q.q, b.q.q);
      EXPECT_EQ(a.q.scales, b.q.scales);
      EXPECT_EQ(a.q.zeros, b.q.zeros);
      EXPECT_EQ(a.loss, b.loss);
    } else {
      std::size_t same = 0;
      for (std::size_t i = 0; i < a.q.q.size(); ++i) same += a.q.q[i] == b.q.q[i];
      EXPECT_GE(static_cast<double>(same), 0.99 * static_cast<double>(a.q.q.size()));
      std::size_t scales_same = 0;
      for (std::size_t i = 0; i < a.q.scales.size(); ++i) scales_same += a.q.scales[i] == b.q.scales[i];
      EXPECT_GE(static_cast<double>(scales_same), 0.99 * static_cast<double>(a.q.scales.size()));
      EXPECT_NEAR(a.loss, b.loss, 0.02 * a.loss);
    }
  }
}

REGISTER_TYPED_TEST_SUITE_P(QuantOps, GptqOnThisBackendWritesTheCpuBackendsCodes, GemmMatchesHostInEveryTransposeCombination,
                            HessianUpdateIsTheRunningMeanOfTwoXxt, InverseCholeskyUpperFactorsTheInverse,
                            InverseCholeskyUpperRefusesAMatrixThatIsNotPositiveDefinite, GptqBlockSweepsColumnsAsTheHostLoop,
                            FakeQuantizeIsTheGroupReconstruction, ErrorSumsMatchHost,
                            QuantizeDeltaIsTheScaledClippedReconstructionMinusTheWeight, RowDotsAreThePerRowSums,
                            AwqOnThisBackendChoosesTheCpuBackendsScales);
