#pragma once
// Op tests of the linear kernels (f16, GGUF blocks, AWQ, GPTQ), written once for every backend.
// Expected values are host products in double of x with: for AWQ/GPTQ, tensors packed and weights computed in
// spec_int_layouts.h from the format description (not with the library's packers or dequantize()); for the
// GGUF kinds, gguf::dequantize_row (checked against llama.cpp's gguf package by tests/python/test_gguf_reference.py).
// Token counts cover the fused GEMV (n <= 8) and the dequantize + GEMM (n > 8) paths of the CUDA backend;
// shapes cover partial tiles, several K chunks / split-K blocks, and every group layout.
#include <algorithm>
#include <cmath>
#include <string>

#include "backend_fixture.h"
#include "mo/core/error.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_dequant.h"
#include "mo/quant/gguf_quantize.h"
#include "mo/formats/quantized_linear.h"
#include "spec_int_layouts.h"

namespace mo::test {

// 1, 2, 3: the AWQ kernel's 128-, 64- and 32-bit load variants; 8: the largest GEMV; 9, 40: GEMM.
inline constexpr std::int64_t kLinearTokenCounts[] = {1, 2, 3, 8, 9, 40};

// Quantized kinds: the device may round x and the dequantized W to f16 (the GEMM path), so each product
// carries a relative error up to 2 * 2^-11 ≈ 9.8e-4; f32 accumulation over <= 1280 terms adds < 1e-4.
// Hence 1.5e-3 of Σ|x·w|, plus 1e-4 absolute for weights in f16's subnormal range (2^-25 each).
inline constexpr double kQuantRelTol = 1.5e-3, kQuantAbsTol = 1e-4;

// y[t, r] against Σ_c x[t, c] * w[r, c] in double, |y - ref| <= rel * Σ|x·w| + abs.
inline void expect_linear_near(const std::vector<float>& y, const std::vector<float>& x, const std::vector<float>& w, std::int64_t n,
                               std::int64_t rows, std::int64_t cols, double rel, double abs, const std::string& what) {
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t r = 0; r < rows; ++r) {
      double ref = 0, mag = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(x[t * cols + c]) * w[r * cols + c];
        ref += p, mag += std::abs(p);
      }
      ASSERT_NEAR(y[t * rows + r], ref, rel * mag + abs) << what << ": token " << t << " row " << r;
    }
}

// Random codes, zeros and scales; act-order shuffles the column -> group assignment.
inline mo::formats::QuantizedLinear random_quantized(std::mt19937_64& rng, std::int64_t rows, std::int64_t cols, int bits, int group,
                                                     bool act_order, bool zero_at_least_one) {
  mo::formats::QuantizedLinear q;
  q.rows = rows, q.cols = cols;
  q.scheme = {bits, group, false};
  const std::int64_t G = q.scheme.effective_group(cols);
  const int groups = q.scheme.groups(cols);
  std::uniform_int_distribution<int> code(0, (1 << bits) - 1), zero(zero_at_least_one ? 1 : 0, (1 << bits) - 1);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  q.q.resize(static_cast<std::size_t>(rows * cols));
  for (auto& v : q.q) v = static_cast<std::uint8_t>(code(rng));
  q.scales.resize(static_cast<std::size_t>(rows * groups));
  q.zeros.resize(q.scales.size());
  for (auto& s : q.scales) s = f32_to_f16(std::bernoulli_distribution(0.5)(rng) ? scale(rng) : -scale(rng));
  for (auto& z : q.zeros) z = static_cast<std::uint8_t>(zero(rng));
  q.g_idx.resize(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c) q.g_idx[c] = static_cast<std::int32_t>(c / G);
  if (act_order) std::shuffle(q.g_idx.begin(), q.g_idx.end(), rng);
  return q;
}

}  // namespace mo::test

template <class Tag>
class LinearOps : public mo::test::BackendTest<Tag> {
 protected:
  // backend.linear on x [n, L.cols]; the caller has put L's buffers in the backend's memory.
  std::vector<float> run(const mo::engine::DeviceLinear& L, const std::vector<float>& x, std::int64_t n) {
    auto dx = this->to_device(x);
    auto dy = this->zeros(static_cast<std::size_t>(n * L.rows) * sizeof(float));
    this->backend().linear(dx.template as<float>(), n, L, dy.template as<float>());
    return this->template to_host<float>(dy, static_cast<std::size_t>(n * L.rows));
  }

  // AWQ layout of q on the device, checked against q's weights for every token count.
  void check_awq(const mo::formats::QuantizedLinear& q, std::size_t weight_offset, const std::string& what) {
    const auto t = mo::test::spec::pack_awq(q);
    const auto w = mo::test::spec::weights(q);
    auto dw = this->zeros(t.qweight.size() * 4 + weight_offset);
    this->backend().upload(dw.template as<char>() + weight_offset, t.qweight.data(), t.qweight.size() * 4);
    auto dz = this->to_device(t.qzeros), ds = this->to_device(t.scales);
    mo::engine::DeviceLinear L;
    L.kind = mo::engine::LinearKind::awq, L.rows = q.rows, L.cols = q.cols, L.weight = dw.template as<char>() + weight_offset;
    L.qzeros = dz.template as<std::int32_t>(), L.scales = ds.template as<std::uint16_t>(), L.bits = 4;
    L.group_size = t.group_size, L.groups = t.groups;
    for (std::int64_t n : mo::test::kLinearTokenCounts) {
      const auto x = this->random_floats(static_cast<std::size_t>(n * q.cols));
      mo::test::expect_linear_near(run(L, x, n), x, w, n, q.rows, q.cols, mo::test::kQuantRelTol, mo::test::kQuantAbsTol,
                                   what + " n=" + std::to_string(n));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  // GPTQ layout of q (v1: zero-1 stored) on the device; g_idx passed only for act-order.
  void check_gptq(const mo::formats::QuantizedLinear& q, bool v1, bool pass_g_idx, std::size_t weight_offset, const std::string& what) {
    const auto t = mo::test::spec::pack_gptq(q, v1);
    const auto w = mo::test::spec::weights(q);
    auto dw = this->zeros(t.qweight.size() * 4 + weight_offset);
    this->backend().upload(dw.template as<char>() + weight_offset, t.qweight.data(), t.qweight.size() * 4);
    auto dz = this->to_device(t.qzeros), ds = this->to_device(t.scales), dg = this->to_device(t.g_idx);
    mo::engine::DeviceLinear L;
    L.kind = mo::engine::LinearKind::gptq, L.rows = q.rows, L.cols = q.cols, L.weight = dw.template as<char>() + weight_offset;
    L.qzeros = dz.template as<std::int32_t>(), L.scales = ds.template as<std::uint16_t>(), L.bits = q.scheme.bits;
    L.g_idx = pass_g_idx ? dg.template as<std::int32_t>() : nullptr;
    L.group_size = q.scheme.effective_group(q.cols), L.groups = t.groups, L.zero_minus_one = v1;
    for (std::int64_t n : mo::test::kLinearTokenCounts) {
      const auto x = this->random_floats(static_cast<std::size_t>(n * q.cols));
      mo::test::expect_linear_near(run(L, x, n), x, w, n, q.rows, q.cols, mo::test::kQuantRelTol, mo::test::kQuantAbsTol,
                                   what + " n=" + std::to_string(n));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  // rows x cols random floats quantized to a GGUF type row by row, checked against dequantize_row.
  void check_gguf(mo::GgmlType type, mo::engine::LinearKind kind, std::int64_t rows, std::int64_t cols, std::size_t weight_offset) {
    const auto ty = static_cast<std::uint32_t>(type);
    const std::size_t row_bytes = mo::ggml_row_bytes(ty, static_cast<std::uint64_t>(cols));
    const auto src = this->random_floats(static_cast<std::size_t>(rows * cols));
    std::vector<std::uint8_t> blocks(row_bytes * static_cast<std::size_t>(rows));
    std::vector<float> w(src.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      mo::quant::gguf_quantize_row(ty, src.data() + r * cols, blocks.data() + r * row_bytes, cols);
      mo::gguf::dequantize_row(ty, blocks.data() + r * row_bytes, w.data() + r * cols, cols);
    }
    auto dw = this->zeros(blocks.size() + weight_offset);
    this->backend().upload(dw.template as<char>() + weight_offset, blocks.data(), blocks.size());
    mo::engine::DeviceLinear L;
    L.kind = kind, L.rows = rows, L.cols = cols, L.weight = dw.template as<char>() + weight_offset, L.row_bytes = row_bytes;
    for (std::int64_t n : mo::test::kLinearTokenCounts) {
      const auto x = this->random_floats(static_cast<std::size_t>(n * cols));
      mo::test::expect_linear_near(run(L, x, n), x, w, n, rows, cols, mo::test::kQuantRelTol, mo::test::kQuantAbsTol,
                                   std::string(mo::engine::linear_kind_name(kind)) + " " + std::to_string(rows) + "x" +
                                       std::to_string(cols) + " offset " + std::to_string(weight_offset) + " n=" + std::to_string(n));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
};
TYPED_TEST_SUITE_P(LinearOps);

// y = x · Wᵀ with f16 weights against a double-precision host product. Tolerance: activations may be
// rounded to f16 on the device (relative 2^-11 each), so the error is bounded by 1e-3 · Σ|x||w|.
TYPED_TEST_P(LinearOps, F16MatchesHostProduct) {
  const std::int64_t rows = 37, cols = 96, n = 3;
  auto x = this->random_floats(n * cols);
  auto wf = this->random_floats(rows * cols);
  std::vector<std::uint16_t> w(wf.size());
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = mo::f32_to_f16(wf[i]);
  auto dx = this->to_device(x), dw = this->to_device(w);
  auto dy = this->zeros(n * rows * sizeof(float));
  mo::engine::DeviceLinear L;
  L.kind = mo::engine::LinearKind::f16, L.rows = rows, L.cols = cols, L.weight = dw.as();
  this->backend().linear(dx.template as<float>(), n, L, dy.template as<float>());
  auto y = this->template to_host<float>(dy, n * rows);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t r = 0; r < rows; ++r) {
      double ref = 0, mag = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const double wv = mo::f16_to_f32(w[r * cols + c]);
        ref += x[t * cols + c] * wv;
        mag += std::abs(x[t * cols + c] * wv);
      }
      ASSERT_NEAR(y[t * rows + r], ref, 1e-3 * mag + 1e-6) << "token " << t << " row " << r;
    }
}

// f16 over every token count and the layouts the kernels treat differently: cols a multiple of 8 (128-bit
// loads) or not, more than one 1024-input chunk, and a W that is only 2-byte aligned. Tolerance: x and
// W·x products as F16MatchesHostProduct (W is exact in f16), 1e-3 of Σ|x·w| plus 1e-6 absolute.
TYPED_TEST_P(LinearOps, F16AllPathsMatchHostProduct) {
  struct Case {
    std::int64_t rows, cols;
    std::size_t offset;
  };
  for (const Case c : {Case{37, 96, 0}, Case{21, 100, 0}, Case{45, 1288, 0}, Case{16, 64, 2}, Case{172, 64, 0}}) {
    const auto wf = this->random_floats(static_cast<std::size_t>(c.rows * c.cols));
    std::vector<std::uint16_t> w(wf.size());
    std::vector<float> wq(wf.size());
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = mo::f32_to_f16(wf[i]), wq[i] = mo::f16_to_f32(w[i]);
    auto dw = this->zeros(w.size() * 2 + c.offset);
    this->backend().upload(dw.template as<char>() + c.offset, w.data(), w.size() * 2);
    mo::engine::DeviceLinear L;
    L.kind = mo::engine::LinearKind::f16, L.rows = c.rows, L.cols = c.cols, L.weight = dw.template as<char>() + c.offset;
    for (std::int64_t n : mo::test::kLinearTokenCounts) {
      const auto x = this->random_floats(static_cast<std::size_t>(n * c.cols));
      mo::test::expect_linear_near(this->run(L, x, n), x, wq, n, c.rows, c.cols, 1e-3, 1e-6,
                                   "f16 " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n=" + std::to_string(n));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// AWQ, group sizes 32/64/128 and one group per row; rows not a multiple of the kernels' tiles (72: 9
// packed words, which also rules out the wide loads) and K split over several blocks (1280 inputs).
TYPED_TEST_P(LinearOps, AwqMatchesDequantized) {
  struct Case {
    std::int64_t rows, cols;
    int group;
  };
  for (const Case c : {Case{72, 256, 32}, Case{136, 192, 64}, Case{256, 1280, 128}, Case{64, 160, -1}}) {
    const auto q = mo::test::random_quantized(this->rng_, c.rows, c.cols, 4, c.group, false, false);
    this->check_awq(q, 0, "awq " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + " g" + std::to_string(c.group));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// GPTQ 4 and 8 bits, v1 (zero-1 stored) and v2, contiguous groups (g_idx null) and act-order (shuffled
// g_idx), group sizes 32/64/128, one per row, and 20 (not a multiple of a word's inputs: the per-input
// group lookup without g_idx); 200 rows is not a multiple of the 128-output tile.
TYPED_TEST_P(LinearOps, GptqMatchesDequantized) {
  struct Case {
    std::int64_t rows, cols;
    int group;
    bool act;
  };
  for (int bits : {4, 8})
    for (bool v1 : {true, false})
      for (const Case c : {Case{64, 256, 32, false}, Case{200, 384, 64, true}, Case{256, 1280, 128, false}, Case{96, 512, 128, true},
                           Case{96, 128, -1, false}, Case{64, 160, 20, false}}) {
        const auto q = mo::test::random_quantized(this->rng_, c.rows, c.cols, bits, c.group, c.act, v1);
        this->check_gptq(q, v1, c.act, 0,
                         "gptq " + std::to_string(bits) + "-bit " + (v1 ? "v1 " : "v2 ") + std::to_string(c.rows) + "x" +
                             std::to_string(c.cols) + " g" + std::to_string(c.group) + (c.act ? " act-order" : ""));
        if (::testing::Test::HasFatalFailure()) return;
      }
  // A tiny model's shape (172 outputs: only 8-bit GPTQ can hold it, 172 % 4 == 0).
  this->check_gptq(mo::test::random_quantized(this->rng_, 172, 64, 8, 32, false, true), true, false, 0, "gptq 8-bit 172x64 g32");
}

// Q8_0, Q4_K, Q6_K from the CPU quantizers, with an odd row count, and 1280 inputs (more than one K chunk).
TYPED_TEST_P(LinearOps, GgufMatchesDequantized) {
  using mo::GgmlType;
  using mo::engine::LinearKind;
  for (std::int64_t cols : {256, 1280}) {
    this->check_gguf(GgmlType::Q8_0, LinearKind::q8_0, 37, cols, 0);
    if (::testing::Test::HasFatalFailure()) return;
    this->check_gguf(GgmlType::Q4_K, LinearKind::q4_k, 37, cols, 0);
    if (::testing::Test::HasFatalFailure()) return;
    this->check_gguf(GgmlType::Q6_K, LinearKind::q6_k, 37, cols, 0);
    if (::testing::Test::HasFatalFailure()) return;
  }
  this->check_gguf(GgmlType::Q8_0, LinearKind::q8_0, 172, 64, 0);  // a tiny model's shape: 2 blocks a row
}

// Weights placed at offsets that break the wide loads: the kernels fall back to narrower loads or to the
// dequantize + GEMM path, with the same results (tolerances as above).
TYPED_TEST_P(LinearOps, MisalignedWeightsFallBack) {
  using mo::GgmlType;
  using mo::engine::LinearKind;
  this->check_gguf(GgmlType::Q4_K, LinearKind::q4_k, 9, 512, 2);
  if (::testing::Test::HasFatalFailure()) return;
  this->check_gguf(GgmlType::Q6_K, LinearKind::q6_k, 9, 256, 2);
  if (::testing::Test::HasFatalFailure()) return;
  this->check_gguf(GgmlType::Q8_0, LinearKind::q8_0, 9, 256, 2);
  if (::testing::Test::HasFatalFailure()) return;
  this->check_awq(mo::test::random_quantized(this->rng_, 256, 256, 4, 128, false, false), 4, "awq offset 4");
  if (::testing::Test::HasFatalFailure()) return;
  this->check_gptq(mo::test::random_quantized(this->rng_, 128, 256, 4, 128, true, true), true, true, 4, "gptq offset 4");
}

// Shapes a kind cannot hold are refused with mo::Error on every backend.
TYPED_TEST_P(LinearOps, InvalidShapesThrow) {
  auto buf = this->zeros(1 << 16);
  auto small = this->zeros(1 << 12);
  const auto x = this->random_floats(2 * 512);
  mo::engine::DeviceLinear L;
  L.weight = buf.as(), L.rows = 8, L.cols = 100;
  L.kind = mo::engine::LinearKind::q4_k, L.row_bytes = 144;
  EXPECT_THROW(this->run(L, x, 1), mo::Error);  // cols not a multiple of 256
  L.kind = mo::engine::LinearKind::q8_0, L.cols = 64, L.row_bytes = 60;
  EXPECT_THROW(this->run(L, x, 1), mo::Error);  // row_bytes inconsistent with cols (68)
  L = {};
  L.kind = mo::engine::LinearKind::awq, L.weight = buf.as(), L.qzeros = small.template as<std::int32_t>();
  L.scales = small.template as<std::uint16_t>(), L.rows = 12, L.cols = 128, L.group_size = 128, L.groups = 1;
  EXPECT_THROW(this->run(L, x, 1), mo::Error);  // rows not a multiple of 8
  L.rows = 16, L.group_size = 96;
  EXPECT_THROW(this->run(L, x, 1), mo::Error);  // group size does not divide cols
  L = {};
  L.kind = mo::engine::LinearKind::gptq, L.weight = buf.as(), L.qzeros = small.template as<std::int32_t>();
  L.scales = small.template as<std::uint16_t>(), L.rows = 16, L.cols = 128, L.bits = 3, L.group_size = 128, L.groups = 1;
  EXPECT_THROW(this->run(L, x, 1), mo::Error);  // 3 bits
  L.bits = 4, L.group_size = 32;
  EXPECT_THROW(this->run(L, x, 1), mo::Error);  // 4 groups needed, 1 given
}

REGISTER_TYPED_TEST_SUITE_P(LinearOps, F16MatchesHostProduct, F16AllPathsMatchHostProduct, AwqMatchesDequantized, GptqMatchesDequantized,
                            GgufMatchesDequantized, MisalignedWeightsFallBack, InvalidShapesThrow);
