// The float-tile kernels behind ops::linear for F32 / F16 / BF16 weights (src/engine/cpu/ftile.h):
// accuracy against a double-precision dot of the exactly decoded weights (and, for F16/BF16, of the
// activations rounded to that type, as llama.cpp does), and batch invariance: a
// (row, token) result is bit-identical whatever the number of tokens in the call, the token's place in
// it and the row range computed, at every SIMD level this CPU has, including K tails (cols = 172).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../src/engine/cpu/ftile.h"
#include "mo/core/half.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/ops/linear.h"
#include "mo/io/gguf_dequant.h"

namespace {

using mo::ops::SimdLevel;
namespace ftile = mo::ops::ftile;

constexpr std::uint32_t kTypes[] = {0, 1, 30};  // F32, F16, BF16

std::size_t elem_bytes(std::uint32_t type) { return type == 0 ? 4 : 2; }

// Random weights in [-1, 1] stored as `type`.
std::vector<std::uint8_t> random_matrix(std::uint32_t type, std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  const std::size_t es = elem_bytes(type);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * cols) * es);
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    const float v = val(rng);
    if (type == 0) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      const std::uint16_t h = type == 1 ? mo::f32_to_f16(v) : mo::f32_to_bf16(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

std::vector<float> random_vec(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& f : v) f = val(rng);
  return v;
}

// x as the kernels see it against `type` weights: F16/BF16 round it to that type.
float as_seen(std::uint32_t type, float v) {
  if (type == 1) return mo::f16_to_f32(mo::f32_to_f16(v));
  if (type == 30) return mo::bf16_to_f32(mo::f32_to_bf16(v));
  return v;
}

std::vector<SimdLevel> levels() {
  std::vector<SimdLevel> out;
  const SimdLevel saved = mo::ops::simd_level();
  for (SimdLevel l : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
    mo::ops::set_simd_level(l);
    if (mo::ops::simd_level() == l) out.push_back(l);
  }
  mo::ops::set_simd_level(saved);
  return out;
}

struct Case {
  std::uint32_t type;
  std::int64_t rows, cols;
  std::vector<std::uint8_t> bytes;
  ftile::Weights w() const { return {type, bytes.data(), static_cast<std::size_t>(cols) * elem_bytes(type), cols}; }
};

Case make_case(std::uint32_t type, std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  return {type, rows, cols, random_matrix(type, rows, cols, rng)};
}

std::string name(const Case& c, SimdLevel l) {
  return "type " + std::to_string(c.type) + " " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " + mo::ops::simd_level_name(l);
}

TEST(FloatTiles, MatchDoublePrecisionReference) {
  std::mt19937 rng(7);
  for (std::uint32_t type : kTypes)
    for (std::int64_t cols : {1, 7, 16, 33, 172, 576}) {
      const Case c = make_case(type, 19, cols, rng);
      const std::int64_t n = 13;
      const std::vector<float> x = random_vec(static_cast<std::size_t>(n * cols), rng);
      std::vector<float> row(static_cast<std::size_t>(cols));
      for (SimdLevel l : levels()) {
        std::vector<float> y(static_cast<std::size_t>(n * c.rows));
        ftile::kernel(type, l)(c.w(), 0, c.rows, x.data(), cols, n, y.data(), c.rows);
        for (std::int64_t r = 0; r < c.rows; ++r) {
          mo::gguf::dequantize_row(type, c.bytes.data() + r * c.w().row_bytes, row.data(), cols);
          for (std::int64_t t = 0; t < n; ++t) {
            double ref = 0, mag = 0;
            for (std::int64_t k = 0; k < cols; ++k) {
              const double p = static_cast<double>(row[k]) * as_seen(type, x[t * cols + k]);
              ref += p, mag += std::fabs(p);
            }
            // Exact weights, f32 sum in a fixed order: error bounded by a few ulps of Σ|w·x| per add level.
            ASSERT_NEAR(y[t * c.rows + r], ref, 1e-5 * mag + 1e-30) << name(c, l) << " row " << r << " token " << t;
          }
        }
      }
    }
}

// With one-hot weight rows each output is one activation as the kernel saw it: F16/BF16 round exactly as
// mo::f32_to_f16 / f32_to_bf16 do (ties to even, subnormals), at every level, in the vector body and the tail.
TEST(FloatTiles, ActivationsRoundedToTheWeightType) {
  std::vector<float> x = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -1.0f - 0x1p-11f, 0x1p-20f, 0x1.8p-24f,
                          3e-8f,           -0x1p-133f,          1.0f + 0x1p-9f, 65504.0f,           -60001.5f,        1e-40f,   0.3f,
                          -7.1234567f};
  std::mt19937 rng(5);
  for (float v : random_vec(37, rng)) x.push_back(v * 1000.0f);
  const std::int64_t cols = static_cast<std::int64_t>(x.size());
  for (std::uint32_t type : {1u, 30u}) {
    std::vector<float> eye(static_cast<std::size_t>(cols * cols), 0.0f);
    for (std::int64_t r = 0; r < cols; ++r) eye[r * cols + r] = 1.0f;
    Case c{type, cols, cols, std::vector<std::uint8_t>(static_cast<std::size_t>(cols * cols) * 2)};
    for (std::size_t i = 0; i < eye.size(); ++i) {
      const std::uint16_t h = type == 1 ? mo::f32_to_f16(eye[i]) : mo::f32_to_bf16(eye[i]);
      std::memcpy(c.bytes.data() + 2 * i, &h, 2);
    }
    std::vector<float> xs;  // the values as tokens 0 and 1, shifted by one column in the second
    xs.insert(xs.end(), x.begin(), x.end());
    xs.push_back(x.back());
    xs.insert(xs.end(), x.begin(), x.end() - 1);
    for (SimdLevel l : levels())
      for (std::int64_t n : {1, 2}) {
        std::vector<float> y(static_cast<std::size_t>(n * cols));
        ftile::kernel(type, l)(c.w(), 0, cols, xs.data(), cols, n, y.data(), cols);
        for (std::int64_t i = 0; i < n * cols; ++i) ASSERT_EQ(y[i], as_seen(type, xs[i])) << name(c, l) << " n " << n << " value " << xs[i];
      }
  }
}

// Every (row, token) of a call with `n` tokens over rows [r0, r1) against the same (row, token) of the
// full call, bit for bit.
void expect_same_as_full(const Case& c, SimdLevel l, const std::vector<float>& x, const std::vector<float>& full, std::int64_t n_full,
                         std::int64_t t0, std::int64_t n, std::int64_t r0, std::int64_t r1) {
  std::vector<float> y(static_cast<std::size_t>(n * c.rows), -7.0f);
  ftile::kernel(c.type, l)(c.w(), r0, r1, x.data() + t0 * c.cols, c.cols, n, y.data(), c.rows);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t r = r0; r < r1; ++r)
      ASSERT_EQ(y[t * c.rows + r], full[(t0 + t) * c.rows + r])
          << name(c, l) << " n " << n << " (of " << n_full << ") rows [" << r0 << ", " << r1 << ") row " << r << " token " << t0 + t;
}

TEST(FloatTiles, BitIdenticalAcrossTokenCountsAndRowRanges) {
  std::mt19937 rng(11);
  for (std::uint32_t type : kTypes)
    for (std::int64_t cols : {172, 576, 9}) {
      const Case c = make_case(type, 53, cols, rng);
      const std::int64_t n_full = 97;  // > one 6- or 4-token tile, not a multiple of either
      const std::vector<float> x = random_vec(static_cast<std::size_t>(n_full * cols), rng);
      for (SimdLevel l : levels()) {
        std::vector<float> full(static_cast<std::size_t>(n_full * c.rows));
        ftile::kernel(type, l)(c.w(), 0, c.rows, x.data(), cols, n_full, full.data(), c.rows);
        for (std::int64_t t = 0; t < n_full; t += 5) expect_same_as_full(c, l, x, full, n_full, t, 1, 0, c.rows);  // decode
        for (std::int64_t n : {2, 3, 5, 6, 7, 8, 13, 40})
          for (std::int64_t t0 : {0, 3, 50}) expect_same_as_full(c, l, x, full, n_full, t0, n, 0, c.rows);
        for (auto [r0, r1] : {std::pair<std::int64_t, std::int64_t>{1, 2}, {3, 50}, {17, 53}, {0, 5}, {30, 39}})
          for (std::int64_t n : {1, 4, 9, 31}) expect_same_as_full(c, l, x, full, n_full, 60, n, r0, r1);
      }
    }
}

// A token block boundary (the kernels re-tile long calls) must not change results either.
TEST(FloatTiles, BitIdenticalForLongCalls) {
  std::mt19937 rng(13);
  for (std::uint32_t type : kTypes) {
    const Case c = make_case(type, 21, 576, rng);
    const std::int64_t n_full = 700;  // several token blocks at 576 columns
    const std::vector<float> x = random_vec(static_cast<std::size_t>(n_full * c.cols), rng);
    for (SimdLevel l : levels()) {
      std::vector<float> full(static_cast<std::size_t>(n_full * c.rows));
      ftile::kernel(type, l)(c.w(), 0, c.rows, x.data(), c.cols, n_full, full.data(), c.rows);
      for (std::int64_t t = 0; t < n_full; t += 61) expect_same_as_full(c, l, x, full, n_full, t, 1, 0, c.rows);
      expect_same_as_full(c, l, x, full, n_full, 250, 450, 2, 19);
    }
  }
}

// The scalar reference performs the AVX2 kernel's exact operation sequence (8 lanes, fma, same final
// sum); AVX-512 (16 lanes) only agrees to f32 rounding.
TEST(FloatTiles, ScalarMatchesSimd) {
  const std::vector<SimdLevel> ls = levels();
  std::mt19937 rng(17);
  for (std::uint32_t type : kTypes)
    for (std::int64_t cols : {172, 576}) {
      const Case c = make_case(type, 30, cols, rng);
      const std::int64_t n = 11;
      const std::vector<float> x = random_vec(static_cast<std::size_t>(n * cols), rng);
      std::vector<float> ref(static_cast<std::size_t>(n * c.rows)), y(ref.size());
      ftile::kernel(type, SimdLevel::scalar)(c.w(), 0, c.rows, x.data(), cols, n, ref.data(), c.rows);
      for (SimdLevel l : ls) {
        ftile::kernel(type, l)(c.w(), 0, c.rows, x.data(), cols, n, y.data(), c.rows);
        for (std::size_t i = 0; i < y.size(); ++i) {
          if (l == SimdLevel::avx2)
            ASSERT_EQ(y[i], ref[i]) << name(c, l) << " at " << i;
          else
            ASSERT_NEAR(y[i], ref[i], 1e-4 * std::sqrt(static_cast<double>(cols))) << name(c, l) << " at " << i;
        }
      }
    }
}

// Through ops::linear: thread counts (so row ranges) and token counts never change a result.
TEST(FloatTiles, OpsLinearBatchInvariantAcrossThreads) {
  std::mt19937 rng(19);
  const SimdLevel saved = mo::ops::simd_level();
  for (std::uint32_t type : kTypes) {
    const Case c = make_case(type, 203, 172, rng);
    mo::engine::Matrix m;
    m.name = "w", m.type = type, m.rows = c.rows, m.cols = c.cols, m.row_bytes = c.w().row_bytes, m.bytes = c.bytes;
    const std::int64_t n_full = 37;
    const std::vector<float> x = random_vec(static_cast<std::size_t>(n_full * c.cols), rng);
    for (SimdLevel l : levels()) {
      mo::ops::set_simd_level(l);
      mo::ThreadPool one(1);
      std::vector<float> full(static_cast<std::size_t>(n_full * c.rows));
      mo::ops::linear(x.data(), n_full, m, full.data(), one);
      for (int threads : {2, 3}) {
        mo::ThreadPool pool(threads);
        for (std::int64_t n : {1, 5, 37}) {
          std::vector<float> y(static_cast<std::size_t>(n * c.rows));
          mo::ops::linear(x.data() + (n_full - n) * c.cols, n, m, y.data(), pool);
          for (std::int64_t i = 0; i < n * c.rows; ++i)
            ASSERT_EQ(y[i], full[(n_full - n) * c.rows + i]) << name(c, l) << " threads " << threads << " n " << n << " at " << i;
        }
      }
    }
  }
  mo::ops::set_simd_level(saved);
}

}  // namespace
