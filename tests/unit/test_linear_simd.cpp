// ops::linear's fused dequantize-and-dot kernels at every SIMD level this CPU has, against a
// double-precision dot of the weights mo::gguf::dequantize_row decodes (with the activations rounded to
// F16 / BF16 for those weights). The kernels decode each weight
// exactly as dequantize_row does and only reorder the f32 additions, so the error is f32 rounding of
// the sum: bounded here by 1e-5 of Σ|w·x| per output (the scale a reordered sum is exact to) and of
// the output's L2 norm overall, for every type alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "mo/core/half.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/engine.h"
#include "mo/engine/ops/linear.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_dequant.h"
#include "mo/formats/gguf_blocks.h"

namespace formats = mo::formats;

namespace {

using mo::GgmlType;
using mo::ops::SimdLevel;

// x as ops::linear feeds it to `type` weights: F16 / BF16 weights see it rounded to their type (as llama.cpp).
double as_seen(std::uint32_t type, float v) {
  if (type == static_cast<std::uint32_t>(GgmlType::F16)) return mo::f16_to_f32(mo::f32_to_f16(v));
  if (type == static_cast<std::uint32_t>(GgmlType::BF16)) return mo::bf16_to_f32(mo::f32_to_bf16(v));
  return v;
}

void put_f16(std::uint8_t* p, float v) {
  const std::uint16_t h = mo::f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Random bytes are valid quants and packed scales for every block type; only the f16 fields need
// real values (no NaN/Inf), written here at their offsets in each block.
std::vector<std::uint8_t> random_row(GgmlType type, std::int64_t cols, std::mt19937& rng) {
  using namespace mo::formats;
  const mo::GgmlTypeInfo* info = mo::ggml_type_info(type);
  const std::int64_t nb = cols / info->block_size;
  std::vector<std::uint8_t> row(static_cast<std::size_t>(nb * info->type_size));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f), scale(0.001f, 0.05f);
  for (auto& b : row) b = static_cast<std::uint8_t>(byte(rng));
  for (std::int64_t i = 0; i < nb; ++i) {
    std::uint8_t* blk = row.data() + i * info->type_size;
    switch (type) {
      case GgmlType::F32: {
        const float v = val(rng);
        std::memcpy(blk, &v, 4);
        break;
      }
      case GgmlType::F16: put_f16(blk, val(rng)); break;
      case GgmlType::BF16: {
        const std::uint16_t h = mo::f32_to_bf16(val(rng));
        std::memcpy(blk, &h, 2);
        break;
      }
      case GgmlType::Q4_0: put_f16(blk + offsetof(formats::BlockQ4_0, d), scale(rng)); break;
      case GgmlType::Q4_1:
        put_f16(blk + offsetof(formats::BlockQ4_1, d), scale(rng));
        put_f16(blk + offsetof(formats::BlockQ4_1, m), -8 * scale(rng));
        break;
      case GgmlType::Q5_0: put_f16(blk + offsetof(formats::BlockQ5_0, d), scale(rng)); break;
      case GgmlType::Q5_1:
        put_f16(blk + offsetof(formats::BlockQ5_1, d), scale(rng));
        put_f16(blk + offsetof(formats::BlockQ5_1, m), -16 * scale(rng));
        break;
      case GgmlType::Q8_0: put_f16(blk + offsetof(formats::BlockQ8_0, d), scale(rng)); break;
      case GgmlType::Q2_K:
        put_f16(blk + offsetof(formats::BlockQ2_K, d), scale(rng));
        put_f16(blk + offsetof(formats::BlockQ2_K, dmin), scale(rng));
        break;
      case GgmlType::Q3_K: put_f16(blk + offsetof(formats::BlockQ3_K, d), scale(rng)); break;
      case GgmlType::Q4_K:
        put_f16(blk + offsetof(formats::BlockQ4_K, d), scale(rng));
        put_f16(blk + offsetof(formats::BlockQ4_K, dmin), scale(rng));
        break;
      case GgmlType::Q5_K:
        put_f16(blk + offsetof(formats::BlockQ5_K, d), scale(rng));
        put_f16(blk + offsetof(formats::BlockQ5_K, dmin), scale(rng));
        break;
      case GgmlType::Q6_K: put_f16(blk + offsetof(formats::BlockQ6_K, d), scale(rng)); break;
      default: ADD_FAILURE() << "no generator for type " << static_cast<int>(type);
    }
  }
  return row;
}

std::vector<SimdLevel> supported_levels() {
  const SimdLevel saved = mo::ops::simd_level();
  std::vector<SimdLevel> out;
  for (SimdLevel l : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
    mo::ops::set_simd_level(l);
    if (mo::ops::simd_level() == l) out.push_back(l);
  }
  mo::ops::set_simd_level(saved);
  return out;
}

struct Case {
  GgmlType type;
  std::vector<std::int64_t> cols;  // row lengths: a multiple of the block, plus tails where the type allows
};

void PrintTo(const Case& c, std::ostream* os) { *os << mo::ggml_type_info(c.type)->name; }

class LinearSimd : public ::testing::TestWithParam<Case> {};

TEST_P(LinearSimd, EveryLevelMatchesDoubleReferenceAndScalar) {
  const Case& c = GetParam();
  const std::string name = mo::ggml_type_info(c.type)->name;
  constexpr std::int64_t kRows = 37;  // odd, so the thread split and the row tiles have remainders
  mo::ThreadPool pool(3);
  std::mt19937 rng(1234);
  const SimdLevel saved = mo::ops::simd_level();
  // The f32-activation row kernels (the integer-dot path quantizes x: tests/unit/test_q8_kernels.cpp).
  mo::ops::set_int_dot(false);
  struct Restore {
    ~Restore() { mo::ops::set_int_dot(true); }
  } restore;
  for (std::int64_t cols : c.cols) {
    // Rows start 1 byte past an aligned address: GGUF data is only as aligned as general.alignment.
    std::vector<std::uint8_t> storage(1);
    std::size_t row_bytes = 0;
    for (std::int64_t r = 0; r < kRows; ++r) {
      const auto row = random_row(c.type, cols, rng);
      row_bytes = row.size();
      storage.insert(storage.end(), row.begin(), row.end());
    }
    mo::engine::Matrix w;
    w.name = "w";
    w.type = static_cast<std::uint32_t>(c.type);
    w.rows = kRows;
    w.cols = cols;
    w.row_bytes = row_bytes;
    w.bytes = std::span<const std::uint8_t>(storage.data() + 1, storage.size() - 1);

    std::vector<float> wf(static_cast<std::size_t>(kRows * cols));
    for (std::int64_t r = 0; r < kRows; ++r) mo::gguf::dequantize_row(w.type, w.row(r), wf.data() + r * cols, cols);

    for (std::int64_t n : {1, 3, 6, 8, 33}) {
      std::vector<float> x(static_cast<std::size_t>(n * cols));
      std::normal_distribution<float> g(0.0f, 1.0f);
      for (auto& v : x) v = g(rng);
      std::vector<double> ref(static_cast<std::size_t>(n * kRows)), mag(ref.size());
      double ref_norm = 0;
      for (std::int64_t t = 0; t < n; ++t)
        for (std::int64_t r = 0; r < kRows; ++r) {
          double s = 0, a = 0;
          for (std::int64_t i = 0; i < cols; ++i) {
            const double p = static_cast<double>(wf[r * cols + i]) * as_seen(w.type, x[t * cols + i]);
            s += p;
            a += std::fabs(p);
          }
          ref[t * kRows + r] = s;
          mag[t * kRows + r] = a;
          ref_norm += s * s;
        }
      ref_norm = std::sqrt(ref_norm);

      std::vector<float> scalar_y;
      for (SimdLevel level : supported_levels()) {
        mo::ops::set_simd_level(level);
        std::vector<float> y(ref.size(), std::nanf(""));
        mo::ops::linear(x.data(), n, w, y.data(), pool);
        if (level == SimdLevel::scalar) scalar_y = y;
        double err_norm = 0;
        for (std::size_t k = 0; k < y.size(); ++k) {
          const double err = std::fabs(y[k] - ref[k]);
          err_norm += err * err;
          ASSERT_TRUE(err <= 1e-5 * mag[k]) << name << " " << mo::ops::simd_level_name(level) << " cols=" << cols << " n=" << n << " out "
                                            << k << ": " << y[k] << " vs " << ref[k];
          if (!scalar_y.empty()) {
            ASSERT_TRUE(std::fabs(y[k] - scalar_y[k]) <= 2e-5 * mag[k])
                << name << " " << mo::ops::simd_level_name(level) << " differs from scalar at out " << k;
          }
        }
        // A token's output must not depend on the batch around it (tests/unit/test_engine_batching.cpp):
        // the same bits whether it is dotted alone or inside a token group.
        for (std::int64_t t : {std::int64_t{0}, n / 2, n - 1}) {
          std::vector<float> alone(kRows);
          mo::ops::linear(x.data() + t * cols, 1, w, alone.data(), pool);
          for (std::int64_t r = 0; r < kRows; ++r)
            ASSERT_EQ(alone[r], y[t * kRows + r])
                << name << " " << mo::ops::simd_level_name(level) << " cols=" << cols << " n=" << n << " token " << t << " row " << r;
        }
        EXPECT_LT(std::sqrt(err_norm), 1e-5 * ref_norm) << name << " " << mo::ops::simd_level_name(level) << " cols=" << cols << " n=" << n;
      }
    }
  }
  mo::ops::set_simd_level(saved);
}

INSTANTIATE_TEST_SUITE_P(Types, LinearSimd,
                         ::testing::Values(Case{GgmlType::F32, {64, 96, 71, 5}}, Case{GgmlType::F16, {64, 96, 71}},
                                           Case{GgmlType::BF16, {64, 96, 71}}, Case{GgmlType::Q4_0, {64, 96}},
                                           Case{GgmlType::Q4_1, {64, 96}}, Case{GgmlType::Q8_0, {64, 96}}, Case{GgmlType::Q4_K, {256, 512}},
                                           Case{GgmlType::Q6_K, {256, 512}},
                                           // No fused SIMD kernel: the scalar level and the row-by-row path.
                                           Case{GgmlType::Q5_0, {64}}, Case{GgmlType::Q5_1, {64}}, Case{GgmlType::Q2_K, {256}},
                                           Case{GgmlType::Q3_K, {256}}, Case{GgmlType::Q5_K, {256}}),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           return std::string(mo::ggml_type_info(param_info.param.type)->name);
                         });

// A whole model: the logits at each SIMD level stay within relative L2 1e-3 (the acceptance bound;
// reordered f32 sums give ~1e-6) of the scalar level's, which dots the dequantized f32 weights.
TEST(LinearSimd, ModelLogitsMatchScalarAtEveryLevel) {
  mo::model::Hparams hp;
  hp.vocab_size = 96;
  hp.hidden_size = 128;
  hp.intermediate_size = 256;
  hp.num_layers = 2;
  hp.num_heads = 4;
  hp.num_kv_heads = 2;
  hp.head_dim = 32;
  hp.context_length = 64;
  mo::ThreadPool pool(2);
  const std::vector<std::int32_t> tokens = {1, 5, 9, 17, 33, 65, 2, 3, 4, 70, 11};
  const auto n = static_cast<std::int64_t>(tokens.size());
  const SimdLevel saved = mo::ops::simd_level();
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q8_0}) {
    mo::engine::Engine e(mo::engine::dummy_weights(hp, static_cast<std::uint32_t>(type), 7), pool);
    std::vector<float> ref;
    for (SimdLevel level : supported_levels()) {
      mo::ops::set_simd_level(level);
      std::vector<float> hidden(static_cast<std::size_t>(n * hp.hidden_size)), logits(static_cast<std::size_t>(n * hp.vocab_size));
      e.embed(tokens, hidden.data());
      for (int l = 0; l < hp.num_layers; ++l) e.run_layer(l, hidden.data(), n, 0);
      e.logits(hidden.data(), n, logits.data());
      if (ref.empty()) {
        ref = logits;
        continue;
      }
      double err = 0, norm = 0;
      for (std::size_t k = 0; k < ref.size(); ++k) {
        err += (logits[k] - ref[k]) * static_cast<double>(logits[k] - ref[k]);
        norm += ref[k] * static_cast<double>(ref[k]);
      }
      EXPECT_LT(std::sqrt(err), 1e-3 * std::sqrt(norm)) << mo::ggml_type_info(type)->name << " " << mo::ops::simd_level_name(level);
      EXPECT_GT(norm, 0.0);
    }
  }
  mo::ops::set_simd_level(saved);
}

TEST(LinearSimd, LevelNamesAndClamp) {
  EXPECT_STREQ(mo::ops::simd_level_name(SimdLevel::avx512), "avx512");
  const SimdLevel saved = mo::ops::simd_level();
  mo::ops::set_simd_level(SimdLevel::scalar);
  EXPECT_EQ(mo::ops::simd_level(), SimdLevel::scalar);
  mo::ops::set_simd_level(saved);
}

}  // namespace
