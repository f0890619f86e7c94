// The integer-dot kernels (src/engine/cpu/q8.h): accuracy against a double-precision dot of the
// dequantized weights with the dequantized 8-bit activations, bit-identical (row, token) results
// whatever the tile shape, the SIMD activation quantizer against the scalar one, and linear_multi
// against separate linear calls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../../src/engine/cpu/q8.h"
#include "../../src/engine/cpu/q8_kernels.h"
#include "../../src/engine/cpu/q8_linear.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/ops/linear.h"
#include "mo/engine/weights.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_dequant.h"
#include "mo/quant/gguf_quantize.h"

namespace {

using namespace mo;
using ops::SimdLevel;
using ops::q8::BlockQ8;

constexpr std::uint32_t kTypes[] = {2, 8, 3, 6, 7, 14, 12, 13, 11, 10};  // Q4_0 Q8_0 Q4_1 Q5_0 Q5_1 Q6_K Q4_K Q5_K Q3_K Q2_K

// Restores the SIMD level a test changed.
struct LevelGuard {
  SimdLevel saved = ops::simd_level();
  ~LevelGuard() { ops::set_simd_level(saved); }
};

// Sets whether 32-weight formats take the row-group (panel) kernels, restoring the setting after.
struct PanelGuard {
  bool saved = ops::q8::panel_kernels();
  explicit PanelGuard(bool on) { ops::q8::set_panel_kernels(on); }
  ~PanelGuard() { ops::q8::set_panel_kernels(saved); }
};

// f() once with the row-group (panel) kernels and once with the per-row tiles.
template <class F>
void for_both_kernel_families(F&& f) {
  for (bool panel : {true, false}) {
    SCOPED_TRACE(panel ? "row-group kernels" : "per-row tiles");
    PanelGuard pg(panel);
    f();
  }
}

// The distinct levels this CPU runs (set_simd_level clamps to what it has).
std::vector<SimdLevel> levels() {
  LevelGuard g;
  std::vector<SimdLevel> out;
  for (SimdLevel l : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
    ops::set_simd_level(l);
    if (ops::simd_level() == l) out.push_back(l);
  }
  return out;
}

std::vector<float> random_vec(std::size_t n, std::uint32_t seed, float scale = 1.0f, float shift = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng) * scale + shift;
  return v;
}

// A [rows, cols] matrix of `type` made with the project's GGUF quantizer; its dequantized f32 copy.
struct QMatrix {
  std::vector<std::uint8_t> bytes;
  std::vector<float> deq;
  engine::Matrix m;
  QMatrix(std::uint32_t type, std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
    const GgmlTypeInfo* info = ggml_type_info(type);
    const std::size_t rb = static_cast<std::size_t>(cols / info->block_size) * info->type_size;
    bytes.resize(rb * rows);
    deq.resize(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r) {
      // Some rows shifted so formats with mins / offsets see non-centred weights.
      const auto src = random_vec(static_cast<std::size_t>(cols), seed + static_cast<std::uint32_t>(r), 0.1f, r % 3 == 0 ? 0.05f : 0.0f);
      quant::gguf_quantize_row(type, src.data(), bytes.data() + r * rb, cols);
      gguf::dequantize_row(type, bytes.data() + r * rb, deq.data() + r * cols, cols);
    }
    m.name = "w";
    m.type = type;
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = rb;
    m.bytes = bytes;
  }
};

std::vector<BlockQ8> quantize(const std::vector<float>& x, std::int64_t n, std::int64_t cols) {
  std::vector<BlockQ8> q(static_cast<std::size_t>(n * cols / 32));
  ops::q8::quantize_rows(x.data(), n, cols, cols, q.data());
  return q;
}

TEST(Q8Kernels, QuantizeRowsSimdMatchesScalar) {
  LevelGuard g;
  const std::int64_t cols = 256, n = 9;
  auto x = random_vec(static_cast<std::size_t>(n * cols), 7);
  for (int i = 0; i < 32; ++i) x[i] = 0.0f;                         // an all-zero block
  for (int i = 32; i < 64; ++i) x[i] = (i % 2 ? 1e-30f : -3e-31f);  // tiny values
  for (int i = 64; i < 96; ++i) x[i] = (i - 80) * 0.5f;             // exact halves: round-to-even cases
  x[100] = 1e6f;
  ops::set_simd_level(SimdLevel::scalar);
  const auto ref = quantize(x, n, cols);
  for (SimdLevel l : levels()) {
    ops::set_simd_level(l);
    const auto q = quantize(x, n, cols);
    EXPECT_EQ(std::memcmp(q.data(), ref.data(), q.size() * sizeof(BlockQ8)), 0) << ops::simd_level_name(l);
  }
  EXPECT_EQ(ref[0].d, 0.0f);
  int s0 = 0;
  for (int i = 0; i < 16; ++i) s0 += ref[1].qs[i];
  EXPECT_EQ(ref[1].sum[0], s0);
}

TEST(Q8Kernels, MatchDoubleReferenceAtEveryLevel) {
  for_both_kernel_families([&] {
    const std::int64_t rows = 13, cols = 512, n = 11;
    const auto x = random_vec(static_cast<std::size_t>(n * cols), 3);
    const auto xq = quantize(x, n, cols);
    std::vector<double> xd(static_cast<std::size_t>(n * cols));
    for (std::size_t b = 0; b < xq.size(); ++b)
      for (int i = 0; i < 32; ++i) xd[b * 32 + i] = static_cast<double>(xq[b].d) * xq[b].qs[i];
    for (std::uint32_t type : kTypes) {
      QMatrix w(type, rows, cols, 100 + type);
      for (SimdLevel l : levels()) {
        const ops::q8::Kernel k = ops::q8::kernel(type, l);
        ASSERT_NE(k, nullptr) << type;
        std::vector<float> y(static_cast<std::size_t>(n * rows));
        k(w.bytes.data(), w.m.row_bytes, rows, xq.data(), n, cols, y.data(), rows);
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t t = 0; t < n; ++t) {
            double s = 0, mag = 0;
            for (std::int64_t i = 0; i < cols; ++i) {
              const double p = w.deq[r * cols + i] * xd[t * cols + i];
              s += p;
              mag += std::fabs(p);
            }
            EXPECT_NEAR(y[t * rows + r], s, 1e-5 * mag + 1e-30)
                << ggml_type_info(type)->name << " " << ops::simd_level_name(l) << " r" << r << " t" << t;
          }
      }
    }
  });
}

TEST(Q8Kernels, BitIdenticalForEveryTileShape) {
  for_both_kernel_families([&] {
    const std::int64_t rows = 13, cols = 512, n = 19;
    const auto x = random_vec(static_cast<std::size_t>(n * cols), 5);
    const auto xq = quantize(x, n, cols);
    const std::int64_t nb = cols / 32;
    const int shapes[][2] = {{1, 1}, {1, 19}, {13, 1}, {2, 3}, {3, 5}, {4, 4}, {5, 7}, {7, 2}, {8, 9}, {13, 19}, {6, 16}};
    for (std::uint32_t type : kTypes) {
      QMatrix w(type, rows, cols, 200 + type);
      for (SimdLevel l : levels()) {
        const ops::q8::Kernel k = ops::q8::kernel(type, l);
        std::vector<float> full(static_cast<std::size_t>(n * rows));
        k(w.bytes.data(), w.m.row_bytes, rows, xq.data(), n, cols, full.data(), rows);
        for (const auto& s : shapes) {
          for (int off = 0; off < 2; ++off) {  // tiles starting at row/token 0 and at 1 (odd alignments)
            std::vector<float> y(full.size(), NAN);
            for (std::int64_t r0 = off; r0 < rows; r0 += s[0])
              for (std::int64_t t0 = off; t0 < n; t0 += s[1]) {
                const int nr = static_cast<int>(std::min<std::int64_t>(s[0], rows - r0)),
                          nt = static_cast<int>(std::min<std::int64_t>(s[1], n - t0));
                k(w.m.row(r0), w.m.row_bytes, nr, xq.data() + t0 * nb, nt, cols, y.data() + t0 * rows + r0, rows);
              }
            for (std::int64_t t = off; t < n; ++t)
              for (std::int64_t r = off; r < rows; ++r)
                ASSERT_EQ(std::memcmp(&y[t * rows + r], &full[t * rows + r], 4), 0)
                    << ggml_type_info(type)->name << " " << ops::simd_level_name(l) << " tile " << s[0] << "x" << s[1] << " r" << r << " t"
                    << t;
          }
        }
      }
    }
  });
}

TEST(Q8Kernels, ScalarAndSimdAgree) {
  for_both_kernel_families([&] {
    const std::int64_t rows = 9, cols = 768, n = 6;
    const auto x = random_vec(static_cast<std::size_t>(n * cols), 11);
    const auto xq = quantize(x, n, cols);
    for (std::uint32_t type : kTypes) {
      QMatrix w(type, rows, cols, 300 + type);
      std::vector<float> ref(static_cast<std::size_t>(n * rows)), y(ref.size());
      ops::q8::kernel(type, SimdLevel::scalar)(w.bytes.data(), w.m.row_bytes, rows, xq.data(), n, cols, ref.data(), rows);
      for (SimdLevel l : levels()) {
        ops::q8::kernel(type, l)(w.bytes.data(), w.m.row_bytes, rows, xq.data(), n, cols, y.data(), rows);
        for (std::size_t i = 0; i < y.size(); ++i)
          EXPECT_NEAR(y[i], ref[i], 1e-5 * (std::fabs(ref[i]) + 1.0)) << ggml_type_info(type)->name;
      }
    }
  });
}

TEST(Q8Kernels, LinearMultiEqualsSeparateCallsAndIsBatchInvariant) {
  const std::int64_t cols = 512;
  QMatrix a(2, 40, cols, 1), b(14, 24, cols, 2), c(8, 17, cols, 3), d(12, 33, cols, 4);
  // An f32 matrix: no integer kernel, so linear_multi takes the separate-calls way.
  std::vector<float> f32 = random_vec(static_cast<std::size_t>(8 * cols), 9);
  engine::Matrix f{"f",
                   0,
                   8,
                   cols,
                   static_cast<std::size_t>(cols) * 4,
                   std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(f32.data()), f32.size() * 4),
                   nullptr,
                   nullptr};
  const std::vector<std::vector<const engine::Matrix*>> groups = {{&a.m, &b.m, &c.m, &d.m}, {&a.m}, {&c.m, &f}};
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (std::int64_t n : {1, 7, 40}) {
      const auto x = random_vec(static_cast<std::size_t>(n * cols), 20 + static_cast<std::uint32_t>(n));
      for (const auto& ws : groups) {
        std::vector<std::vector<float>> multi, sep;
        std::vector<float*> ptrs;
        for (const auto* w : ws) multi.emplace_back(static_cast<std::size_t>(n * w->rows), NAN);
        for (auto& v : multi) ptrs.push_back(v.data());
        ops::linear_multi(x.data(), n, ws, ptrs, pool);
        for (std::size_t i = 0; i < ws.size(); ++i) {
          std::vector<float> y(static_cast<std::size_t>(n * ws[i]->rows));
          ops::linear(x.data(), n, *ws[i], y.data(), pool);
          ASSERT_EQ(std::memcmp(y.data(), multi[i].data(), y.size() * 4), 0) << "matrix " << i << " n " << n << " threads " << threads;
          // Token by token gives the same bits as the batch (integer-kernel matrices).
          if (ws[i]->type == 0) continue;
          for (std::int64_t t = 0; t < n; t += 3) {
            std::vector<float> y1(static_cast<std::size_t>(ws[i]->rows));
            ops::linear(x.data() + t * cols, 1, *ws[i], y1.data(), pool);
            ASSERT_EQ(std::memcmp(y1.data(), y.data() + t * ws[i]->rows, y1.size() * 4), 0) << "token " << t;
          }
        }
      }
    }
  }
}

TEST(Q8Kernels, IntegerPathCloseToFloatPath) {
  const std::int64_t cols = 512, n = 5;
  ThreadPool pool(2);
  const auto x = random_vec(static_cast<std::size_t>(n * cols), 31);
  for (std::uint32_t type : kTypes) {
    QMatrix w(type, 20, cols, 400 + type);
    std::vector<float> yi(static_cast<std::size_t>(n * 20)), yf(yi.size());
    ops::linear(x.data(), n, w.m, yi.data(), pool);
    ops::q8::set_int_dot(false);
    ops::linear(x.data(), n, w.m, yf.data(), pool);
    ops::q8::set_int_dot(true);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < yi.size(); ++i) num += (yi[i] - yf[i]) * (yi[i] - yf[i]), den += yf[i] * yf[i];
    EXPECT_LT(std::sqrt(num / den), 2e-2) << ggml_type_info(type)->name;  // 8-bit activations: ~0.5% typical
  }
}

}  // namespace
