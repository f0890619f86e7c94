#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf.h"
#include "mo/io/gguf_writer.h"

#ifndef MO_SHARED_DATA
#error "MO_SHARED_DATA must be defined by the build as the path of the shared data folder"
#endif

namespace {

using mo::gguf::Value;
using mo::gguf::ValueType;
using mo::gguf::Writer;

constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ4_K = 12, kBF16 = 30;

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("mo_gguf_writer_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string error_of(auto fn) {
  try {
    fn();
  } catch (const mo::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<uint8_t> pattern(std::size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + 31 * i);
  return v;
}

// One key of every value type, with boundary values, and arrays of each (empty and nested included).
std::vector<std::pair<std::string, Value>> every_value_type() {
  const float f32s[] = {0.5f, -1e-20f, std::numeric_limits<float>::infinity()};
  const int32_t i32s[] = {std::numeric_limits<int32_t>::min(), 0, 7};
  const uint32_t u32s[] = {0, 4000000000u};
  return {
      {"general.architecture", Value::str("llama")},
      {"u8", Value::u8(255)},
      {"i8", Value::i8(-128)},
      {"u16", Value::u16(65535)},
      {"i16", Value::i16(-32768)},
      {"u32", Value::u32(4294967295u)},
      {"i32", Value::i32(std::numeric_limits<int32_t>::min())},
      {"f32", Value::f32(-1.25e-7f)},
      {"bool.true", Value::boolean(true)},
      {"bool.false", Value::boolean(false)},
      {"string", Value::str("h\xc3\xa9llo, \"world\"\n")},
      {"string.empty", Value::str("")},
      {"u64", Value::u64(std::numeric_limits<uint64_t>::max())},
      {"i64", Value::i64(std::numeric_limits<int64_t>::min())},
      {"f64", Value::f64(0.1)},
      {"array.u8", Value::array(ValueType::u8, {Value::u8(0), Value::u8(200)})},
      {"array.i8", Value::array(ValueType::i8, {Value::i8(-1)})},
      {"array.u16", Value::array(ValueType::u16, {Value::u16(1), Value::u16(2)})},
      {"array.i16", Value::array(ValueType::i16, {Value::i16(-300)})},
      {"array.u32", Value::array_of_u32(u32s)},
      {"array.i32", Value::array_of_i32(i32s)},
      {"array.f32", Value::array_of_f32(f32s)},
      {"array.bool", Value::array(ValueType::boolean, {Value::boolean(true), Value::boolean(false)})},
      {"array.string", Value::array_of_strings({"<s>", "", "\xe2\x96\x81the"})},
      {"array.u64", Value::array(ValueType::u64, {Value::u64(1ull << 40)})},
      {"array.i64", Value::array(ValueType::i64, {Value::i64(-(1ll << 40))})},
      {"array.f64", Value::array(ValueType::f64, {Value::f64(-2.5), Value::f64(1e300)})},
      {"array.empty", Value::array(ValueType::f32, {})},
      // [[7, 8], ["x"], [], [[true]]]
      {"array.nested",
       Value::array(ValueType::array, {Value::array(ValueType::u8, {Value::u8(7), Value::u8(8)}), Value::array_of_strings({"x"}),
                                       Value::array(ValueType::i64, {}),
                                       Value::array(ValueType::array, {Value::array(ValueType::boolean, {Value::boolean(true)})})})},
  };
}

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type;
  std::vector<uint8_t> data;
};

std::vector<TensorSpec> some_tensors() {
  return {{"token_embd.weight", {256, 3}, kQ4_K, pattern(3 * 144, 1)},
          {"blk.0.attn_q.weight", {64, 2}, kQ8_0, pattern(2 * 2 * 34, 2)},  // 136 bytes: padding follows
          {"output_norm.weight", {5}, kF32, pattern(20, 3)},
          {"half", {3, 1, 1, 1}, kF16, pattern(6, 4)},
          {"brain", {7}, kBF16, pattern(14, 5)},
          {"empty", {0, 4}, kF32, {}}};
}

struct Layout {
  uint32_t version;
  uint32_t alignment;  // 0: leave general.alignment unset (32)
};

class GgufWriterRoundTrip : public ::testing::TestWithParam<Layout> {};

TEST_P(GgufWriterRoundTrip, ReadsBackEveryValueTypeAndTensor) {
  const Layout layout = GetParam();
  const std::string path = temp_path("roundtrip.gguf");
  Writer w(path, layout.version);
  auto kvs = every_value_type();
  if (layout.alignment != 0) kvs.insert(kvs.begin() + 1, {"general.alignment", Value::u32(layout.alignment)});
  for (const auto& [k, v] : kvs) w.set(k, v);
  const std::vector<TensorSpec> tensors = some_tensors();
  for (const TensorSpec& t : tensors) w.add_tensor(t.name, t.ne, t.type, t.data);
  w.write();
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp-" + std::to_string(::getpid())));

  const mo::gguf::File f = mo::gguf::read_metadata(path);
  const uint64_t alignment = layout.alignment != 0 ? layout.alignment : 32;
  EXPECT_EQ(f.version, layout.version);
  EXPECT_EQ(f.alignment, alignment);
  EXPECT_EQ(f.metadata, kvs);
  EXPECT_EQ(f.data_offset % alignment, 0u);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  uint64_t expected_offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const mo::gguf::TensorInfo& t = f.tensors[i];
    EXPECT_EQ(t.name, tensors[i].name);
    EXPECT_EQ(t.ne, tensors[i].ne);
    EXPECT_EQ(t.type, tensors[i].type);
    EXPECT_EQ(t.offset, expected_offset) << t.name;
    const auto bytes = f.tensor_bytes(t);
    EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.end()), tensors[i].data) << t.name;
    expected_offset += (tensors[i].data.size() + alignment - 1) / alignment * alignment;
  }
  // Like llama.cpp, the last tensor is padded too.
  EXPECT_EQ(std::filesystem::file_size(path), f.data_offset + expected_offset);
}

INSTANTIATE_TEST_SUITE_P(VersionsAndAlignments, GgufWriterRoundTrip,
                         ::testing::Values(Layout{3, 0}, Layout{3, 32}, Layout{3, 64}, Layout{2, 0}, Layout{2, 64}, Layout{3, 1}),
                         [](const auto& param_info) {
                           return "v" + std::to_string(param_info.param.version) + "_align" + std::to_string(param_info.param.alignment);
                         });

// Little-endian bytes assembled field by field, to state exactly what the writer must produce.
class Bytes {
 public:
  template <typename T>
  Bytes& raw(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(std::string_view s) {
    raw<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& bytes(const std::vector<uint8_t>& v) {
    b_.insert(b_.end(), v.begin(), v.end());
    return *this;
  }
  Bytes& pad_to(std::size_t a) {
    b_.resize((b_.size() + a - 1) / a * a, 0);
    return *this;
  }
  const std::vector<uint8_t>& get() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

TEST(GgufWriter, WritesTheExactLayoutOfLlamaCpp) {
  const std::vector<uint8_t> a = pattern(34, 9), b = pattern(8, 10);
  const std::string path = temp_path("exact.gguf");
  Writer w(path);
  w.set("general.alignment", Value::u32(64));
  w.set("nested", Value::array(ValueType::array, {Value::array(ValueType::i16, {Value::i16(-2)})}));
  w.add_tensor("a", {32}, kQ8_0, a);
  w.add_tensor("b", {2}, kF32, b);
  w.write();

  Bytes e;
  e.raw<uint32_t>(0x46554747).raw<uint32_t>(3).raw<uint64_t>(2).raw<uint64_t>(2);
  e.str("general.alignment").raw<uint32_t>(4).raw<uint32_t>(64);
  e.str("nested").raw<uint32_t>(9).raw<uint32_t>(9).raw<uint64_t>(1).raw<uint32_t>(3).raw<uint64_t>(1).raw<int16_t>(-2);
  e.str("a").raw<uint32_t>(1).raw<uint64_t>(32).raw<uint32_t>(kQ8_0).raw<uint64_t>(0);
  e.str("b").raw<uint32_t>(1).raw<uint64_t>(2).raw<uint32_t>(kF32).raw<uint64_t>(64);
  e.pad_to(64).bytes(a).pad_to(64).bytes(b).pad_to(64);
  EXPECT_EQ(read_all(path), e.get());
}

TEST(GgufWriter, MetadataOnlyFileIsPaddedLikeLlamaCpp) {
  const std::string path = temp_path("meta.gguf");
  Writer w(path, 2);
  w.set("k", Value::u8(1));
  w.write();
  Bytes e;
  e.raw<uint32_t>(0x46554747).raw<uint32_t>(2).raw<uint64_t>(0).raw<uint64_t>(1);
  e.str("k").raw<uint32_t>(0).raw<uint8_t>(1).pad_to(32);
  EXPECT_EQ(read_all(path), e.get());
  EXPECT_EQ(mo::gguf::read_metadata(path).get_int("k"), 1);
}

TEST(GgufWriter, SetKeepsInsertionOrderAndReplacesInPlace) {
  Writer w(temp_path("order.gguf"));
  w.set("b", Value::u32(1));
  w.set("a", Value::str("x"));
  w.set("c", Value::f32(2.0f));
  w.set("a", Value::i64(-5));
  ASSERT_EQ(w.metadata().size(), 3u);
  EXPECT_EQ(w.metadata()[0].first, "b");
  EXPECT_EQ(w.metadata()[1].first, "a");
  EXPECT_EQ(w.metadata()[1].second, Value::i64(-5));
  EXPECT_TRUE(w.remove("b"));
  EXPECT_FALSE(w.remove("b"));
  EXPECT_EQ(w.find("b"), nullptr);
  EXPECT_EQ(w.metadata().front().first, "a");
}

TEST(GgufWriter, OwnsMovedDataAndReferencesSpans) {
  const std::string path = temp_path("owned.gguf");
  Writer w(path);
  std::vector<std::vector<uint8_t>> expected;
  for (int i = 0; i < 40; ++i) {  // enough tensors to make the writer's list reallocate
    std::vector<uint8_t> data = pattern(16, static_cast<uint8_t>(i));
    expected.push_back(data);
    w.add_tensor("t" + std::to_string(i), {4}, kF32, std::move(data));
  }
  w.write();
  const mo::gguf::File f = mo::gguf::read_metadata(path);
  ASSERT_EQ(f.tensors.size(), 40u);
  for (int i = 0; i < 40; ++i) {
    const auto bytes = f.tensor_bytes(f.tensors[i]);
    EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.end()), expected[i]) << i;
  }
}

TEST(GgufWriter, RejectsBadTensorsAndValues) {
  const std::string path = temp_path("bad.gguf");
  Writer w(path);
  const std::vector<uint8_t> data(144);
  w.add_tensor("t", {36}, kF32, data);
  EXPECT_EQ(error_of([&] { w.add_tensor("t", {36}, kF32, data); }), path + ": tensor 't': added twice");
  EXPECT_EQ(error_of([&] { w.add_tensor("u", {35}, kF32, data); }),
            path + ": tensor 'u': 144 bytes of data given, 140 of type f32 expected");
  EXPECT_EQ(error_of([&] { w.add_tensor("u", {100}, kQ4_K, data); }),
            path + ": tensor 'u': 100 weights of type q4_K are not a multiple of its block size 256");
  EXPECT_EQ(error_of([&] { w.add_tensor("u", {36}, 4, data); }), path + ": tensor 'u': unknown ggml type 4");
  EXPECT_EQ(error_of([&] { w.add_tensor("u", {1, 1, 1, 1, 36}, kF32, data); }), path + ": tensor 'u': 5 dimensions (at most 4)");
  EXPECT_EQ(error_of([&] { w.add_tensor("", {36}, kF32, data); }), path + ": tensor '': tensor names cannot be empty");
  EXPECT_EQ(error_of([&] { w.add_tensor(std::string(64, 'n'), {36}, kF32, data); }),
            path + ": tensor '" + std::string(64, 'n') + "': the name is 64 bytes long; llama.cpp allows at most 63");

  EXPECT_EQ(error_of([&] { w.set("general.alignment", Value::u32(48)); }),
            path + ": metadata key 'general.alignment' must be a u32 power of two");
  EXPECT_THROW(w.set("general.alignment", Value::u64(64)), mo::Error);
  EXPECT_THROW(w.set("", Value::u8(1)), mo::Error);
  EXPECT_EQ(error_of([] { Value::array(ValueType::u8, {Value::u8(1), Value::i8(2)}); }), "array of u8: element 1 is i8");
  EXPECT_THROW(Writer(path, 1), mo::Error);

  // Values assembled by hand are checked when written; nothing is left behind.
  Writer bad(path);
  bad.set("small", Value{ValueType::u8, ValueType::u8, uint64_t{300}});
  EXPECT_EQ(error_of([&] { bad.write(); }), path + ": metadata key 'small': 300 does not fit in u8");
  Writer mixed(path);
  mixed.set("list", Value{ValueType::array, ValueType::u32, std::vector<Value>{Value::u32(1), Value::str("x")}});
  EXPECT_EQ(error_of([&] { mixed.write(); }), path + ": metadata key 'list': element 1 of an array of u32 is string");
  Writer kind(path);
  kind.set("name", Value{ValueType::string, ValueType::string, uint64_t{1}});
  EXPECT_EQ(error_of([&] { kind.write(); }), path + ": metadata key 'name': a string value holds the wrong kind of data");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(GgufWriter, ReportsUnwritablePaths) {
  const std::string path = "/nonexistent-dir/out.gguf";
  Writer w(path);
  w.set("k", Value::u8(1));
  const std::string msg = error_of([&] { w.write(); });
  EXPECT_EQ(msg.rfind(path + ": cannot create /nonexistent-dir/out.gguf.tmp-", 0), 0u) << msg;
  EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
}

TEST(GgufWriter, ReplacesAnExistingFile) {
  const std::string path = temp_path("replace.gguf");
  std::ofstream(path) << "old contents";
  Writer w(path);
  w.set("k", Value::str("new"));
  w.write();
  EXPECT_EQ(mo::gguf::read_metadata(path).get_string("k"), "new");
}

// Reading a llama.cpp-written model and writing its metadata and tensors back gives the same bytes.
TEST(GgufWriter, RewritesStories260KByteForByte) {
  const std::string model = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " not found";
  const mo::gguf::File f = mo::gguf::read_metadata(model);
  const std::string path = temp_path("stories260K.gguf");
  Writer w(path, f.version);
  for (const auto& [k, v] : f.metadata) w.set(k, v);
  for (const auto& t : f.tensors) w.add_tensor(t.name, t.ne, t.type, f.tensor_bytes(t));
  w.write();
  const std::vector<uint8_t> want = read_all(model), got = read_all(path);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "first difference at byte "
                           << std::distance(got.begin(), std::mismatch(got.begin(), got.end(), want.begin()).first);
}

}  // namespace
