#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/core/mapped_file.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf.h"
#include "mo/io/gguf_dequant.h"
#include "mo/io/gguf_writer.h"
#include "mo/formats/gguf_blocks.h"

#ifndef MO_SHARED_DATA
#error "MO_SHARED_DATA must be defined by the build as the path of the shared data folder"
#endif

namespace {

namespace formats = mo::formats;
using mo::GgmlType;

constexpr uint32_t id(GgmlType t) { return static_cast<uint32_t>(t); }

template <typename Block>
std::vector<float> dequant(GgmlType type, const Block& b) {
  const int n = static_cast<int>(mo::ggml_type_info(type)->block_size);
  std::vector<float> out(n);
  mo::gguf::dequantize_row(id(type), &b, out.data(), n);
  return out;
}

// Deterministic filler for the quant bytes of hand-built blocks.
template <std::size_t N>
void fill(std::uint8_t (&a)[N], std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (auto& x : a) x = static_cast<std::uint8_t>(rng());
}

std::string error_of(auto fn) {
  try {
    fn();
  } catch (const mo::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("mo_gguf_dequant_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(GgufBlocks, LayoutsMatchGgmlTypeSizes) {
  const struct {
    GgmlType type;
    std::size_t size;
  } cases[] = {{GgmlType::Q4_0, sizeof(formats::BlockQ4_0)}, {GgmlType::Q4_1, sizeof(formats::BlockQ4_1)},
               {GgmlType::Q5_0, sizeof(formats::BlockQ5_0)}, {GgmlType::Q5_1, sizeof(formats::BlockQ5_1)},
               {GgmlType::Q8_0, sizeof(formats::BlockQ8_0)}, {GgmlType::Q2_K, sizeof(formats::BlockQ2_K)},
               {GgmlType::Q3_K, sizeof(formats::BlockQ3_K)}, {GgmlType::Q4_K, sizeof(formats::BlockQ4_K)},
               {GgmlType::Q5_K, sizeof(formats::BlockQ5_K)}, {GgmlType::Q6_K, sizeof(formats::BlockQ6_K)}};
  for (const auto& c : cases) EXPECT_EQ(mo::ggml_type_info(c.type)->type_size, c.size) << mo::ggml_type_info(c.type)->name;
  // Field positions that the on-disk format fixes (ggml-common.h).
  EXPECT_EQ(offsetof(formats::BlockQ2_K, d), 80u);
  EXPECT_EQ(offsetof(formats::BlockQ3_K, d), 108u);
  EXPECT_EQ(offsetof(formats::BlockQ5_K, qs), 48u);
  EXPECT_EQ(offsetof(formats::BlockQ6_K, scales), 192u);
  EXPECT_EQ(offsetof(formats::BlockQ6_K, d), 208u);
}

TEST(GgufDequant, Q4_0) {
  formats::BlockQ4_0 b{};
  b.d = mo::f32_to_f16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  const auto y = dequant(GgmlType::Q4_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f) << j;
  }
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[31], -4.0f);
}

TEST(GgufDequant, Q4_1) {
  formats::BlockQ4_1 b{};
  b.d = mo::f32_to_f16(0.25f);
  b.m = mo::f32_to_f16(-1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  const auto y = dequant(GgmlType::Q4_1, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 1.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j) * 0.25f - 1.0f) << j;
  }
  EXPECT_EQ(y[16], 2.75f);
}

TEST(GgufDequant, Q5_0) {
  formats::BlockQ5_0 b{};
  b.d = mo::f32_to_f16(1.0f);
  const std::uint32_t qh = 0xAAAAAAAAu;  // fifth bit set for every odd weight
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | (3 << 4));
  const auto y = dequant(GgmlType::Q5_0, b);
  for (int j = 0; j < 16; ++j) {
    const int high = (j % 2) * 16;
    EXPECT_EQ(y[j], static_cast<float>(j + high - 16)) << j;
    EXPECT_EQ(y[j + 16], static_cast<float>(3 + high - 16)) << j;
  }
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[31], 3.0f);
}

TEST(GgufDequant, Q5_1) {
  formats::BlockQ5_1 b{};
  b.d = mo::f32_to_f16(0.5f);
  b.m = mo::f32_to_f16(2.0f);
  const std::uint32_t qh = 0xFFFF0000u;  // fifth bit set for weights 16..31
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | (j << 4));
  const auto y = dequant(GgmlType::Q5_1, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], j * 0.5f + 2.0f) << j;
}

TEST(GgufDequant, Q8_0) {
  formats::BlockQ8_0 b{};
  b.d = mo::f32_to_f16(0.125f);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<std::int8_t>(j * 8 - 128);
  const auto y = dequant(GgmlType::Q8_0, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], static_cast<float>(j - 16)) << j;
}

// The k-quant references below compute each weight from its index, straight from the layout comments
// in gguf_blocks.h (and docs/formats.md), rather than walking the blocks as the implementation does.

float ref_q2_k(const formats::BlockQ2_K& b, int i) {
  const int half = i / 128, k = (i % 128) / 32, l = i % 32;
  const int q = (b.qs[32 * half + l] >> (2 * k)) & 3;
  const int sc = b.scales[i / 16];
  return mo::f16_to_f32(b.d) * (sc & 0xF) * q - mo::f16_to_f32(b.dmin) * (sc >> 4);
}

float ref_q3_k(const formats::BlockQ3_K& b, int i) {
  const int half = i / 128, k = (i % 128) / 32, l = i % 32, s = i / 16;
  const int low = (b.qs[32 * half + l] >> (2 * k)) & 3;
  const bool high = (b.hmask[l] >> (4 * half + k)) & 1;
  const int sc_low = s < 8 ? b.scales[s] & 0xF : b.scales[s - 8] >> 4;
  const int sc_high = (b.scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  const int sc = (sc_low | (sc_high << 4)) - 32;
  return mo::f16_to_f32(b.d) * sc * (low - (high ? 0 : 4));
}

// Sub-block j's 6-bit scale and min (docs/formats.md, "Scale/min unpacking").
void ref_scale_min(const std::uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

float ref_q4_k(const formats::BlockQ4_K& b, int i) {
  const int chunk = i / 64, w = i % 64;
  const int q = w < 32 ? b.qs[32 * chunk + w] & 0xF : b.qs[32 * chunk + w - 32] >> 4;
  int sc, m;
  ref_scale_min(b.scales, i / 32, sc, m);
  return mo::f16_to_f32(b.d) * sc * q - mo::f16_to_f32(b.dmin) * m;
}

float ref_q5_k(const formats::BlockQ5_K& b, int i) {
  const int chunk = i / 64, w = i % 64;
  const int low = w < 32 ? b.qs[32 * chunk + w] & 0xF : b.qs[32 * chunk + w - 32] >> 4;
  const int high = (b.qh[w % 32] >> (2 * chunk + (w >= 32 ? 1 : 0))) & 1;
  int sc, m;
  ref_scale_min(b.scales, i / 32, sc, m);
  return mo::f16_to_f32(b.d) * sc * (low + 16 * high) - mo::f16_to_f32(b.dmin) * m;
}

float ref_q6_k(const formats::BlockQ6_K& b, int i) {
  const int half = i / 128, g = (i % 128) / 32, l = i % 32;
  const std::uint8_t lb = b.ql[64 * half + l + (g % 2) * 32];
  const int low = g < 2 ? lb & 0xF : lb >> 4;
  const int high = (b.qh[32 * half + l] >> (2 * g)) & 3;
  return mo::f16_to_f32(b.d) * b.scales[i / 16] * ((low | (high << 4)) - 32);
}

template <typename Block, typename Ref>
void expect_matches_reference(GgmlType type, const Block& b, Ref ref) {
  const auto y = dequant(type, b);
  for (int i = 0; i < formats::QK_K; ++i) ASSERT_EQ(y[i], ref(b, i)) << mo::ggml_type_info(type)->name << " weight " << i;
}

TEST(GgufDequant, Q2_K) {
  formats::BlockQ2_K b{};
  b.d = mo::f32_to_f16(0.5f);
  b.dmin = mo::f32_to_f16(1.0f);
  b.scales[0] = 0x23;  // scale 3, min 2
  b.scales[2] = 0x01;
  b.qs[0] = 0b11100100;
  const auto y = dequant(GgmlType::Q2_K, b);
  EXPECT_EQ(y[0], 0.5f * 3 * 0 - 2.0f);  // bits 0-1 of qs[0]
  EXPECT_EQ(y[32], 0.5f * 1 * 1);        // bits 2-3, sub-block 2
  EXPECT_EQ(y[1], -2.0f);
  fill(b.scales, 1);
  fill(b.qs, 2);
  expect_matches_reference(GgmlType::Q2_K, b, ref_q2_k);
}

TEST(GgufDequant, Q3_K) {
  formats::BlockQ3_K b{};
  b.d = mo::f32_to_f16(1.0f);
  b.scales[0] = 0x05;  // sub-block 0: low 4 bits 5
  b.scales[8] = 0x02;  // ... high 2 bits 2 -> 37 - 32 = 5
  b.qs[0] = 0x03;      // weight 0: low bits 3; weight 32: low bits 0
  b.hmask[0] = 0x01;   // weight 0 has its high bit, weight 32 not
  const auto y = dequant(GgmlType::Q3_K, b);
  EXPECT_EQ(y[0], 15.0f);    // 5 * 3
  EXPECT_EQ(y[32], 128.0f);  // sub-block 2 scale 0 - 32 = -32, q = 0 - 4
  fill(b.hmask, 3);
  fill(b.qs, 4);
  fill(b.scales, 5);
  b.d = mo::f32_to_f16(-0.75f);
  expect_matches_reference(GgmlType::Q3_K, b, ref_q3_k);
}

TEST(GgufDequant, Q4_K) {
  formats::BlockQ4_K b{};
  b.d = mo::f32_to_f16(1.0f);
  b.dmin = mo::f32_to_f16(0.5f);
  b.scales[0] = 2 | (1 << 6);  // sc0 = 2; high bits of sc4 = 1
  b.scales[1] = 3;             // sc1 = 3
  b.scales[4] = 1 | (2 << 6);  // m0 = 1; high bits of m4 = 2
  b.scales[8] = 0x21;          // sc4 low = 1, m4 low = 2 -> sc4 = 17, m4 = 34
  b.qs[0] = 0x53;              // weight 0 = 3, weight 32 = 5
  b.qs[64] = 0x07;             // weight 128 = 7
  const auto y = dequant(GgmlType::Q4_K, b);
  EXPECT_EQ(y[0], 1.0f * 2 * 3 - 0.5f * 1);
  EXPECT_EQ(y[32], 15.0f);
  EXPECT_EQ(y[128], 17.0f * 7 - 0.5f * 34);
  fill(b.scales, 6);
  fill(b.qs, 7);
  b.dmin = mo::f32_to_f16(0.0123f);
  expect_matches_reference(GgmlType::Q4_K, b, ref_q4_k);
}

TEST(GgufDequant, Q5_K) {
  formats::BlockQ5_K b{};
  b.d = mo::f32_to_f16(1.0f);
  b.scales[0] = 1;
  b.scales[1] = 2;
  b.qs[0] = 0x0F;  // weight 0 low bits 15, weight 32 low bits 0
  b.qh[0] = 0x03;  // both have their fifth bit
  const auto y = dequant(GgmlType::Q5_K, b);
  EXPECT_EQ(y[0], 31.0f);
  EXPECT_EQ(y[32], 32.0f);
  fill(b.scales, 8);
  fill(b.qh, 9);
  fill(b.qs, 10);
  b.dmin = mo::f32_to_f16(-3.5f);
  expect_matches_reference(GgmlType::Q5_K, b, ref_q5_k);
}

TEST(GgufDequant, Q6_K) {
  formats::BlockQ6_K b{};
  b.d = mo::f32_to_f16(0.5f);
  b.scales[0] = -3;
  b.scales[4] = 2;
  b.ql[0] = 0x21;  // weight 0 low 1, weight 64 low 2
  b.qh[0] = 0x03;  // weight 0 high 3, weight 64 high 0
  const auto y = dequant(GgmlType::Q6_K, b);
  EXPECT_EQ(y[0], 0.5f * -3 * ((1 | 48) - 32));
  EXPECT_EQ(y[64], 0.5f * 2 * (2 - 32));
  fill(b.ql, 11);
  fill(b.qh, 12);
  std::mt19937 rng(13);
  for (auto& s : b.scales) s = static_cast<std::int8_t>(rng());
  b.d = mo::f32_to_f16(0.0371f);  // products with scale and q need rounding: Q6_K's one rounding step
  expect_matches_reference(GgmlType::Q6_K, b, ref_q6_k);
}

TEST(GgufDequant, FloatTypes) {
  const std::uint16_t f16[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00, 0x8000};
  float y[6];
  mo::gguf::dequantize_row(id(GgmlType::F16), f16, y, 6);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_EQ(y[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(y[4], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(y[5]));

  const std::uint16_t bf16[] = {0x3F80, 0xC0A0, 0x7FC0};
  mo::gguf::dequantize_row(id(GgmlType::BF16), bf16, y, 3);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -5.0f);
  EXPECT_TRUE(std::isnan(y[2]));

  const float f32[] = {1.5f, -0.0f, 3e38f};
  mo::gguf::dequantize_row(id(GgmlType::F32), f32, y, 3);
  EXPECT_EQ(std::memcmp(y, f32, sizeof(f32)), 0);
}

TEST(GgufDequant, ReadsUnalignedBlocksAndManyBlocks) {
  std::vector<formats::BlockQ4_K> blocks(3);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    blocks[i].d = mo::f32_to_f16(0.25f * (i + 1));
    blocks[i].dmin = mo::f32_to_f16(0.125f);
    fill(blocks[i].scales, 20 + i);
    fill(blocks[i].qs, 30 + i);
  }
  // One byte in: a file with general.alignment = 1 can put a tensor at any address.
  std::vector<std::uint8_t> buf(1 + sizeof(formats::BlockQ4_K) * blocks.size());
  std::memcpy(buf.data() + 1, blocks.data(), sizeof(formats::BlockQ4_K) * blocks.size());
  std::vector<float> y(3 * formats::QK_K);
  mo::gguf::dequantize_row(id(GgmlType::Q4_K), buf.data() + 1, y.data(), 3 * formats::QK_K);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    for (int i = 0; i < formats::QK_K; ++i) ASSERT_EQ(y[b * formats::QK_K + i], ref_q4_k(blocks[b], i)) << b << " " << i;
  }
}

TEST(GgufDequant, RejectsOtherTypesAndPartialBlocks) {
  std::vector<std::uint8_t> src(1024);
  std::vector<float> dst(1024);
  EXPECT_EQ(error_of([&] { mo::gguf::dequantize_row(id(GgmlType::Q8_1), src.data(), dst.data(), 32); }),
            "cannot dequantize ggml type 9 (q8_1)");
  EXPECT_EQ(error_of([&] { mo::gguf::dequantize_row(id(GgmlType::IQ2_XXS), src.data(), dst.data(), 256); }),
            "cannot dequantize ggml type 16 (iq2_xxs)");
  EXPECT_EQ(error_of([&] { mo::gguf::dequantize_row(4, src.data(), dst.data(), 32); }), "cannot dequantize ggml type 4");
  EXPECT_EQ(error_of([&] { mo::gguf::dequantize_row(id(GgmlType::Q4_K), src.data(), dst.data(), 100); }),
            "cannot dequantize 100 weights of ggml type 12 (q4_K): not a multiple of its block size 256");
  EXPECT_THROW(mo::gguf::dequantize_row(id(GgmlType::F32), src.data(), dst.data(), -4), mo::Error);
  EXPECT_TRUE(mo::gguf::can_dequantize(id(GgmlType::Q6_K)));
  EXPECT_TRUE(mo::gguf::can_dequantize(id(GgmlType::BF16)));
  EXPECT_FALSE(mo::gguf::can_dequantize(id(GgmlType::I32)));
  EXPECT_FALSE(mo::gguf::can_dequantize(id(GgmlType::Q8_K)));
}

TEST(GgufDequant, DequantizesTensorsOfAFile) {
  formats::BlockQ8_0 q8[2]{};
  for (int b = 0; b < 2; ++b) {
    q8[b].d = mo::f32_to_f16(b == 0 ? 1.0f : -0.5f);
    for (int j = 0; j < 32; ++j) q8[b].qs[j] = static_cast<std::int8_t>(j - 16);
  }
  const std::int32_t ints[4] = {1, 2, 3, 4};
  const std::string path = temp_path("tensors.gguf");
  mo::gguf::Writer w(path);
  w.add_tensor("q8", {32, 2}, id(GgmlType::Q8_0), std::span(reinterpret_cast<const std::uint8_t*>(q8), sizeof(q8)));
  w.add_tensor("ints", {4}, id(GgmlType::I32), std::span(reinterpret_cast<const std::uint8_t*>(ints), sizeof(ints)));
  w.write();

  const mo::gguf::File f = mo::gguf::read_metadata(path);
  const std::vector<float> y = mo::gguf::dequantize(f, *f.find_tensor("q8"));
  ASSERT_EQ(y.size(), 64u);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[31], 15.0f);
  EXPECT_EQ(y[32], 8.0f);
  EXPECT_EQ(y[63], -7.5f);
  EXPECT_EQ(error_of([&] { mo::gguf::dequantize(f, *f.find_tensor("ints")); }),
            path + ": tensor 'ints': cannot dequantize ggml type 26 (i32)");

  mo::gguf::TensorInfo far = *f.find_tensor("q8");
  far.offset = 1 << 20;
  EXPECT_EQ(error_of([&] { mo::gguf::dequantize(f, far); }),
            path + ": tensor 'q8' has 68 bytes of data at data offset 1048576, outside the file (" +
                std::to_string(std::filesystem::file_size(path)) + " bytes, data section from offset " + std::to_string(f.data_offset) +
                ")");
  mo::gguf::File unmapped = f;
  unmapped.mapping.reset();
  EXPECT_EQ(error_of([&] { mo::gguf::dequantize(unmapped, *f.find_tensor("q8")); }), path + ": tensor 'q8': the file is not mapped");
}

// --- Mutation test: thousands of damaged copies of a real model file. ---

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A numeric field of the original file that a mutation can overwrite.
struct Field {
  std::size_t at;  // byte offset in the file
  int width;       // 4 or 8 bytes
};

// Walks a well-formed GGUF file and records where its counts, lengths, types, shapes and offsets lie.
class FieldFinder {
 public:
  explicit FieldFinder(const std::vector<std::uint8_t>& b) : b_(b) {}

  std::vector<Field> find() {
    pos_ = 8;
    const std::uint64_t n_tensors = u64(true), n_kv = u64(true);
    for (std::uint64_t i = 0; i < n_kv; ++i) {
      string(true);
      value(static_cast<mo::gguf::ValueType>(u32(true)), true);
    }
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
      string(true);
      const std::uint32_t n_dims = u32(true);
      for (std::uint32_t d = 0; d < n_dims; ++d) u64(true);
      u32(true);
      u64(true);
    }
    return fields_;
  }

 private:
  std::uint32_t u32(bool record) {
    if (record) fields_.push_back({pos_, 4});
    std::uint32_t v;
    std::memcpy(&v, b_.data() + pos_, 4);
    pos_ += 4;
    return v;
  }
  std::uint64_t u64(bool record) {
    if (record) fields_.push_back({pos_, 8});
    std::uint64_t v;
    std::memcpy(&v, b_.data() + pos_, 8);
    pos_ += 8;
    return v;
  }
  void string(bool record) { pos_ += u64(record); }

  void value(mo::gguf::ValueType type, bool record) {
    using mo::gguf::ValueType;
    switch (type) {
      case ValueType::u8:
      case ValueType::i8:
      case ValueType::boolean: pos_ += 1; return;
      case ValueType::u16:
      case ValueType::i16: pos_ += 2; return;
      case ValueType::u32:
      case ValueType::i32:
      case ValueType::f32: pos_ += 4; return;
      case ValueType::u64:
      case ValueType::i64:
      case ValueType::f64: pos_ += 8; return;
      case ValueType::string: string(record); return;
      case ValueType::array: {
        const auto elem = static_cast<ValueType>(u32(record));
        const std::uint64_t count = u64(record);
        // Every 37th element of a long array (the 512 token strings) is enough.
        for (std::uint64_t i = 0; i < count; ++i) value(elem, record && i % 37 == 0);
        return;
      }
    }
  }

  const std::vector<std::uint8_t>& b_;
  std::size_t pos_ = 0;
  std::vector<Field> fields_;
};

// Reads one damaged copy: either a clean mo::Error (one line, naming the file and an offset) or a
// File whose every tensor lies inside the mapping and dequantizes.
class MutationChecker {
 public:
  explicit MutationChecker(std::string path) : path_(std::move(path)) {}

  void check(const std::string& mutation) {
    mo::gguf::File f;
    try {
      f = mo::gguf::read_metadata(path_);
    } catch (const mo::Error& e) {
      const std::string msg = e.what();
      ++errors;
      EXPECT_EQ(msg.rfind(path_ + ": ", 0), 0u) << mutation << ": " << msg;
      EXPECT_NE(msg.find("offset"), std::string::npos) << mutation << ": " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << mutation << ": " << msg;
      return;
    }
    ++loads;
    const std::uint8_t* begin = f.mapping->data();
    const std::uint8_t* end = begin + f.mapping->size();
    for (const mo::gguf::TensorInfo& t : f.tensors) {
      const auto bytes = f.tensor_bytes(t);
      ASSERT_EQ(bytes.size(), t.n_bytes()) << mutation << ": " << t.name;
      if (!bytes.empty()) {
        ASSERT_TRUE(bytes.data() >= begin && bytes.data() + bytes.size() <= end) << mutation << ": " << t.name;
      }
      if (mo::gguf::can_dequantize(t.type)) {
        EXPECT_EQ(mo::gguf::dequantize(f, t).size(), t.n_elements()) << mutation << ": " << t.name;
      } else {
        EXPECT_THROW(mo::gguf::dequantize(f, t), mo::Error) << mutation << ": " << t.name;
        ++undecodable;
      }
    }
  }

  int loads = 0, errors = 0, undecodable = 0;

 private:
  std::string path_;
};

// Overwrites bytes of an open file in place and puts the original back, so that each of thousands of
// copies costs a few bytes of I/O rather than a whole file.
class Patcher {
 public:
  Patcher(const std::string& path, const std::vector<std::uint8_t>& original) : original_(original) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(original.data()), original.size());
    fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  }
  ~Patcher() { ::close(fd_); }
  bool ok() const { return fd_ >= 0; }
  void write(std::size_t at, const void* p, std::size_t n) {
    ASSERT_EQ(::pwrite(fd_, p, n, static_cast<off_t>(at)), static_cast<ssize_t>(n));
  }
  void restore(std::size_t at, std::size_t n) { write(at, original_.data() + at, n); }
  void truncate(std::size_t n) { ASSERT_EQ(::ftruncate(fd_, static_cast<off_t>(n)), 0); }

 private:
  const std::vector<std::uint8_t>& original_;
  int fd_ = -1;
};

TEST(GgufMutation, DamagedCopiesOfARealFileFailCleanlyOrLoad) {
  const std::string model = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " not found";
  const std::vector<std::uint8_t> original = read_all(model);
  const std::size_t size = original.size();
  const std::size_t data_offset = mo::gguf::read_metadata(model).data_offset;
  std::mt19937_64 rng(20240611);
  const auto uniform = [&](std::size_t lo, std::size_t hi) {  // [lo, hi)
    return std::uniform_int_distribution<std::size_t>(lo, hi - 1)(rng);
  };

  const std::string path = temp_path("mutant.gguf");
  MutationChecker checker(path);
  int truncations = 0, header_flips = 0, data_flips = 0, field_writes = 0;
  {
    Patcher patch(path, original);
    ASSERT_TRUE(patch.ok());

    // Flipped bytes (1 to 4 of them, random masks) in the header, metadata and tensor infos.
    for (int i = 0; i < 1500; ++i, ++header_flips) {
      std::vector<std::size_t> at;
      for (std::size_t k = uniform(1, 5); k > 0; --k) at.push_back(uniform(0, data_offset));
      for (std::size_t a : at) {
        const auto v = static_cast<std::uint8_t>(original[a] ^ uniform(1, 256));
        patch.write(a, &v, 1);
      }
      checker.check("flip in header at " + std::to_string(at[0]));
      for (std::size_t a : at) patch.restore(a, 1);
    }
    // Flipped bytes in the tensor data: the file stays well-formed.
    const int loads_before = checker.loads;
    for (int i = 0; i < 300; ++i, ++data_flips) {
      const std::size_t a = uniform(data_offset, size);
      const std::uint8_t v = 0xFF;
      patch.write(a, &v, 1);
      checker.check("flip in data at " + std::to_string(a));
      patch.restore(a, 1);
    }
    EXPECT_EQ(checker.loads - loads_before, data_flips) << "damaged tensor data must still load";

    // Huge, zero, off-by-one and boundary values written into every count, length, type, shape and
    // offset field.
    const std::vector<Field> fields = FieldFinder(original).find();
    ASSERT_GT(fields.size(), 300u);
    for (const Field& f : fields) {
      std::uint64_t orig = 0;
      std::memcpy(&orig, original.data() + f.at, f.width);
      std::vector<std::uint64_t> values = {0, 1, orig + 1, orig - 1, orig * 2, size, size - f.at, uniform(0, size)};
      if (f.width == 4) {
        values.insert(values.end(), {2, 5, 9, 12, 13, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF});
      } else {
        values.insert(values.end(), {std::uint64_t{1} << 32, std::uint64_t{1} << 62, std::uint64_t{1} << 63, 0x7FFFFFFFFFFFFFFF,
                                     0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFF0});
      }
      for (std::uint64_t v : values) {
        patch.write(f.at, &v, f.width);  // little-endian host: the low bytes come first
        checker.check("value " + std::to_string(v) + " written at " + std::to_string(f.at));
        patch.restore(f.at, f.width);
        ++field_writes;
      }
    }

    // Truncations, longest first so each is one ftruncate: every prefix of this file is invalid
    // because its last tensor ends at the last byte.
    std::vector<std::size_t> cuts;
    for (std::size_t n = 0; n < 64; ++n) cuts.push_back(n);
    for (int i = 0; i < 300; ++i) cuts.push_back(uniform(0, data_offset + 64));
    for (int i = 0; i < 200; ++i) cuts.push_back(uniform(data_offset, size));
    cuts.push_back(size - 1);
    std::sort(cuts.rbegin(), cuts.rend());
    const int errors_before = checker.errors;
    for (std::size_t n : cuts) {
      patch.truncate(n);
      checker.check("truncated to " + std::to_string(n) + " bytes");
      ++truncations;
    }
    EXPECT_EQ(checker.errors - errors_before, truncations) << "a truncated copy must never load";
  }

  const int total = truncations + header_flips + data_flips + field_writes;
  EXPECT_EQ(checker.loads + checker.errors, total);
  EXPECT_GE(total, 3000);
  EXPECT_GT(checker.loads, data_flips);  // some header damage leaves a readable file (e.g. a changed name)
  std::cout << "mutated copies: " << total << " (" << truncations << " truncations, " << header_flips << " header flips, " << data_flips
            << " data flips, " << field_writes << " field overwrites); " << checker.loads << " loaded (" << checker.undecodable
            << " tensors of types we do not decode), " << checker.errors << " clean errors\n";
  RecordProperty("loads", checker.loads);
  RecordProperty("errors", checker.errors);
  std::filesystem::remove(path);
}

}  // namespace
