#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/mapped_file.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf.h"
#include "mo/io/json_file.h"

#ifndef MO_SHARED_DATA
#error "MO_SHARED_DATA must be defined by the build as the path of the shared data folder"
#endif

namespace {

using mo::gguf::ValueType;

// Little-endian GGUF bytes, assembled field by field so each test states exactly what is on disk.
class Bytes {
 public:
  template <typename T>
  Bytes& raw(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return raw(v); }
  Bytes& u32(uint32_t v) { return raw(v); }
  Bytes& u64(uint64_t v) { return raw(v); }
  Bytes& type(ValueType t) { return u32(static_cast<uint32_t>(t)); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b_.insert(b_.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& key(std::string_view k, ValueType t) { return str(k).type(t); }
  Bytes& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t ggml_type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) u64(n);
    return u32(ggml_type).u64(offset);
  }
  Bytes& zeros(std::size_t n) {
    b_.resize(b_.size() + n, 0);
    return *this;
  }
  Bytes& pad_to(std::size_t alignment) { return zeros((alignment - b_.size() % alignment) % alignment); }
  std::size_t size() const { return b_.size(); }
  const std::vector<uint8_t>& bytes() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

constexpr uint32_t kF32 = 0, kQ8_0 = 8, kQ4_K = 12;

// One folder per test process: ctest runs tests in parallel processes, possibly from other
// checkouts, and each test writes its own files.
class TempFolder {
 public:
  TempFolder() : path_(std::filesystem::path(::testing::TempDir()) / ("mo_gguf_test_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

const std::filesystem::path& temp_folder() {
  static const TempFolder folder;
  return folder.path();
}

std::string write_temp(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = (temp_folder() / name).string();
  // A new file rather than a truncated one: ext4 flushes a file truncated to zero and rewritten when
  // it is closed (auto_da_alloc), which made the tests that rewrite one file hundreds of times slow.
  std::filesystem::remove(path);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return path;
}

std::string write_temp(const std::string& name, const Bytes& b) { return write_temp(name, b.bytes()); }

// The message of the mo::Error that reading `path` throws, or "(no error)".
std::string read_error(const std::string& path) {
  try {
    mo::gguf::read_metadata(path);
  } catch (const mo::Error& e) {
    return e.what();
  }
  return "(no error)";
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// Two tensors (a Q8_0 matrix and an F32 vector) with the last tensor ending exactly at the end of
// the file, so that every shorter prefix is invalid.
Bytes small_file(uint32_t version = 3) {
  Bytes b;
  b.header(version, 2, 3);
  b.key("general.architecture", ValueType::string).str("llama");
  b.key("llama.block_count", ValueType::u32).u32(2);
  b.key("tokenizer.ggml.tokens", ValueType::array).type(ValueType::string).u64(3).str("<s>").str("a").str("b");
  b.tensor("a.weight", {32, 2}, kQ8_0, 0);  // 2 rows * 34 bytes = 68, padded to 96
  b.tensor("b.weight", {4}, kF32, 96);
  b.pad_to(32).zeros(96 + 16);
  return b;
}

// Header plus one metadata entry whose value the caller appends.
Bytes one_key(std::string_view key, ValueType type) {
  Bytes b;
  b.header(3, 0, 1).key(key, type);
  return b;
}

// A v3 file: header, the encoded metadata `kvs` and tensor `infos`, padding, then `data_bytes` zeros.
Bytes with_tensors(uint64_t n_tensors, const Bytes& infos, std::size_t data_bytes, const Bytes& kvs = {}, uint64_t n_kv = 0) {
  Bytes b;
  b.header(3, n_tensors, n_kv);
  for (uint8_t c : kvs.bytes()) b.u8(c);
  for (uint8_t c : infos.bytes()) b.u8(c);
  return b.pad_to(32).zeros(data_bytes);
}

TEST(GgmlTypes, BlockSizesMatchLlamaCpp) {
  const struct {
    mo::GgmlType type;
    uint32_t block, bytes;
    const char* name;
  } cases[] = {{mo::GgmlType::Q4_K, 256, 144, "q4_K"}, {mo::GgmlType::Q6_K, 256, 210, "q6_K"}, {mo::GgmlType::Q8_0, 32, 34, "q8_0"},
               {mo::GgmlType::Q4_0, 32, 18, "q4_0"},   {mo::GgmlType::Q4_1, 32, 20, "q4_1"},   {mo::GgmlType::BF16, 1, 2, "bf16"},
               {mo::GgmlType::TQ2_0, 256, 66, "tq2_0"}};
  for (const auto& c : cases) {
    const mo::GgmlTypeInfo* info = mo::ggml_type_info(c.type);
    ASSERT_NE(info, nullptr) << c.name;
    EXPECT_STREQ(info->name, c.name);
    EXPECT_EQ(info->block_size, c.block) << c.name;
    EXPECT_EQ(info->type_size, c.bytes) << c.name;
  }
}

TEST(GgmlTypes, RemovedAndUnknownIdsHaveNoInfo) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 38u, 40u, 1000u}) EXPECT_EQ(mo::ggml_type_info(id), nullptr) << id;
}

TEST(GgmlTypes, NamesAreCaseInsensitiveAndRoundTrip) {
  EXPECT_EQ(mo::ggml_type_from_name("q4_k"), 12u);
  EXPECT_EQ(mo::ggml_type_from_name("Q4_K"), 12u);
  EXPECT_EQ(mo::ggml_type_from_name("BF16"), 30u);
  EXPECT_EQ(mo::ggml_type_from_name("q4_2"), std::nullopt);
  EXPECT_EQ(mo::ggml_type_from_name(""), std::nullopt);
  for (uint32_t id = 0; id < 64; ++id) {
    if (const mo::GgmlTypeInfo* info = mo::ggml_type_info(id)) {
      EXPECT_EQ(mo::ggml_type_from_name(info->name), id);
    }
  }
}

TEST(GgmlTypes, BitsPerWeightAndRowBytes) {
  EXPECT_DOUBLE_EQ(mo::ggml_bits_per_weight(kQ4_K), 4.5);
  EXPECT_DOUBLE_EQ(mo::ggml_bits_per_weight(kQ8_0), 8.5);
  EXPECT_DOUBLE_EQ(mo::ggml_bits_per_weight(kF32), 32.0);
  EXPECT_EQ(mo::ggml_row_bytes(kQ4_K, 4096), 16u * 144u);
  EXPECT_EQ(mo::ggml_row_bytes(kF32, 64), 256u);
  EXPECT_EQ(mo::ggml_row_bytes(kQ8_0, 0), 0u);
  try {
    mo::ggml_row_bytes(kQ4_K, 100);
    FAIL() << "no error";
  } catch (const mo::Error& e) {
    EXPECT_TRUE(contains(e.what(), "100 weights of type q4_K are not a multiple of its block size 256"));
  }
  EXPECT_THROW(mo::ggml_bits_per_weight(4), mo::Error);
}

TEST(MappedFile, MapsContents) {
  const std::string path = write_temp("mapped.bin", std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o'});
  const mo::MappedFile f(path);
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(std::memcmp(f.data(), "hello", 5), 0);
  EXPECT_EQ(f.path(), path);
}

TEST(MappedFile, EmptyFileHasSizeZero) {
  const mo::MappedFile f(write_temp("empty.bin", std::vector<uint8_t>{}));
  EXPECT_EQ(f.size(), 0u);
  EXPECT_EQ(f.data(), nullptr);
}

TEST(MappedFile, MoveTransfersTheMapping) {
  mo::MappedFile a(write_temp("move.bin", std::vector<uint8_t>{1, 2, 3}));
  mo::MappedFile b(std::move(a));
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.data(), nullptr);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b.data()[2], 3);
  mo::MappedFile c(write_temp("move2.bin", std::vector<uint8_t>{9}));
  c = std::move(b);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c.data()[0], 1);
}

TEST(MappedFile, MissingFileOrDirectoryIsUsageError) {
  try {
    mo::MappedFile f("/nonexistent/model.gguf");
    FAIL() << "no error";
  } catch (const mo::UsageError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/model.gguf: cannot open: No such file or directory");
  }
  try {
    mo::MappedFile f(temp_folder().string());
    FAIL() << "no error";
  } catch (const mo::UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "cannot open: Is a directory"));
  }
}

TEST(GgufReader, ReadsStories260K) {
  const std::string path = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  // Facts below were read with gguf-py's GGUFReader (gguf 0.19.0).
  const mo::gguf::File f = mo::gguf::read_metadata(path);
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.alignment, 32u);
  EXPECT_EQ(f.data_offset, 14176u);
  ASSERT_EQ(f.metadata.size(), 19u);
  EXPECT_EQ(f.metadata.front().first, "tokenizer.ggml.tokens");
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f.get_int("llama.context_length"), 2048);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 8);
  EXPECT_EQ(f.get_int("tokenizer.ggml.seperator_token_id"), 4294967295);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_number("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f.get_int_opt("llama.vocab_size"), std::nullopt);

  const mo::gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->elem_type, ValueType::string);
  ASSERT_EQ(tokens->as_array().size(), 512u);
  EXPECT_EQ(tokens->as_array()[0].as_string(), "<unk>");
  EXPECT_EQ(f.find("tokenizer.ggml.scores")->elem_type, ValueType::f32);
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->as_array()[0].as_int(), 2);

  ASSERT_EQ(f.tensors.size(), 48u);
  const struct {
    const char* name;
    std::vector<uint64_t> ne;
    uint64_t offset, bytes;
  } expected[] = {{"token_embd.weight", {64, 512}, 0, 131072},
                  {"output_norm.weight", {64}, 131072, 256},
                  {"blk.0.attn_k.weight", {64, 32}, 278784, 8192},
                  {"blk.0.ffn_down.weight", {172, 64}, 355840, 44032},
                  {"blk.4.ffn_norm.weight", {64}, 1170944, 256}};
  for (const auto& e : expected) {
    const mo::gguf::TensorInfo* t = f.find_tensor(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->ne, e.ne) << e.name;
    EXPECT_EQ(t->type, kF32) << e.name;
    EXPECT_EQ(t->offset, e.offset) << e.name;
    EXPECT_EQ(t->n_bytes(), e.bytes) << e.name;
  }
  EXPECT_EQ(f.tensors.back().name, "blk.4.ffn_norm.weight");
  EXPECT_EQ(f.find_tensor("blk.5.attn_q.weight"), nullptr);
}

TEST(GgufReader, ReadsEveryValueType) {
  Bytes b;
  b.header(3, 0, 15);
  b.key("u8", ValueType::u8).u8(200);
  b.key("i8", ValueType::i8).raw<int8_t>(-100);
  b.key("u16", ValueType::u16).raw<uint16_t>(60000);
  b.key("i16", ValueType::i16).raw<int16_t>(-30000);
  b.key("u32", ValueType::u32).u32(4000000000u);
  b.key("i32", ValueType::i32).raw<int32_t>(-2000000000);
  b.key("f32", ValueType::f32).raw<float>(1.5f);
  b.key("true", ValueType::boolean).u8(1);
  b.key("false", ValueType::boolean).u8(0);
  b.key("string", ValueType::string).str("h\xc3\xa9llo");
  b.key("u64", ValueType::u64).u64(std::numeric_limits<uint64_t>::max());
  b.key("i64", ValueType::i64).raw<int64_t>(std::numeric_limits<int64_t>::min());
  b.key("f64", ValueType::f64).raw<double>(0.1);
  b.key("ints", ValueType::array).type(ValueType::i32).u64(3).raw<int32_t>(1).raw<int32_t>(-2).raw<int32_t>(3);
  // [[7, 8], ["x"], []]
  b.key("nested", ValueType::array).type(ValueType::array).u64(3);
  b.type(ValueType::u8).u64(2).u8(7).u8(8);
  b.type(ValueType::string).u64(1).str("x");
  b.type(ValueType::f64).u64(0);
  const std::string path = write_temp("all_types.gguf", b);

  const mo::gguf::File f = mo::gguf::read_metadata(path);
  EXPECT_EQ(f.get_int("u8"), 200);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.get_int("u16"), 60000);
  EXPECT_EQ(f.get_int("i16"), -30000);
  EXPECT_EQ(f.get_int("u32"), 4000000000);
  EXPECT_EQ(f.get_int("i32"), -2000000000);
  EXPECT_EQ(f.get_number("f32"), 1.5);
  EXPECT_TRUE(f.find("true")->as_bool());
  EXPECT_FALSE(f.find("false")->as_bool());
  EXPECT_EQ(f.get_string("string"), "h\xc3\xa9llo");
  EXPECT_EQ(std::get<uint64_t>(f.find("u64")->data), std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(f.find("u64")->is_int());
  EXPECT_THROW(f.get_int("u64"), mo::Error);  // above INT64_MAX
  EXPECT_EQ(f.get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_number("f64"), 0.1);
  EXPECT_EQ(f.find("f64")->type, ValueType::f64);

  const auto& ints = f.find("ints")->as_array();
  ASSERT_EQ(ints.size(), 3u);
  EXPECT_EQ(ints[1].as_int(), -2);
  EXPECT_EQ(ints[1].type, ValueType::i32);

  const mo::gguf::Value& nested = *f.find("nested");
  EXPECT_EQ(nested.elem_type, ValueType::array);
  ASSERT_EQ(nested.as_array().size(), 3u);
  EXPECT_EQ(nested.as_array()[0].elem_type, ValueType::u8);
  EXPECT_EQ(nested.as_array()[0].as_array()[1].as_int(), 8);
  EXPECT_EQ(nested.as_array()[1].as_array()[0].as_string(), "x");
  EXPECT_EQ(nested.as_array()[2].elem_type, ValueType::f64);
  EXPECT_TRUE(nested.as_array()[2].as_array().empty());

  std::vector<std::string> order;
  for (const auto& kv : f.metadata) order.push_back(kv.first);
  EXPECT_EQ(order.front(), "u8");
  EXPECT_EQ(order.back(), "nested");
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_EQ(f.data_offset, b.size());
}

TEST(GgufReader, AccessorsNameExpectedAndActualType) {
  const mo::gguf::File f = mo::gguf::read_metadata(write_temp("getters.gguf", small_file()));
  EXPECT_EQ(f.get_number("llama.block_count"), 2.0);
  EXPECT_EQ(f.get_number_opt("missing"), std::nullopt);
  EXPECT_EQ(f.get_int_opt("llama.block_count"), 2);
  try {
    f.get_int("general.architecture");
    FAIL() << "no error";
  } catch (const mo::Error& e) {
    EXPECT_EQ(std::string(e.what()), f.path + ": metadata key 'general.architecture': expected an integer, got string");
  }
  try {
    f.get_string("llama.context_length");
    FAIL() << "no error";
  } catch (const mo::Error& e) {
    EXPECT_EQ(std::string(e.what()), f.path + ": metadata key 'llama.context_length' is missing");
  }
  try {
    f.find("tokenizer.ggml.tokens")->as_string();
    FAIL() << "no error";
  } catch (const mo::Error& e) {
    EXPECT_STREQ(e.what(), "expected string, got array of string");
  }
  EXPECT_THROW(f.find("llama.block_count")->as_bool(), mo::Error);
  EXPECT_THROW(f.find("llama.block_count")->as_array(), mo::Error);
}

TEST(GgufReader, ReadsTensorInfosOfASmallFile) {
  const mo::gguf::File f = mo::gguf::read_metadata(write_temp("small.gguf", small_file()));
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.data_offset % 32, 0u);
  const mo::gguf::TensorInfo& a = f.tensors[0];
  EXPECT_EQ(a.name, "a.weight");
  EXPECT_EQ(a.type, kQ8_0);
  EXPECT_EQ(a.n_elements(), 64u);
  EXPECT_EQ(a.n_bytes(), 68u);
  EXPECT_EQ(f.tensors[1].offset, 96u);
}

TEST(GgufReader, ReadsVersion2) {
  const mo::gguf::File f = mo::gguf::read_metadata(write_temp("v2.gguf", small_file(2)));
  EXPECT_EQ(f.version, 2u);
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_EQ(f.tensors.size(), 2u);
}

TEST(GgufReader, RejectsOtherVersions) {
  EXPECT_TRUE(contains(read_error(write_temp("v1.gguf", small_file(1))), "GGUF v1 files are not supported"));
  EXPECT_TRUE(contains(read_error(write_temp("v4.gguf", small_file(4))), "unsupported GGUF version 4 at offset 4"));
  EXPECT_TRUE(contains(read_error(write_temp("be.gguf", small_file(0x03000000))), "byte-swapped"));
}

TEST(GgufReader, RejectsBadMagic) {
  Bytes b = small_file();
  std::vector<uint8_t> bytes = b.bytes();
  std::memcpy(bytes.data(), "GGML", 4);
  const std::string path = write_temp("magic.gguf", bytes);
  EXPECT_EQ(read_error(path), path + ": not a GGUF file (magic 'GGML' at offset 0)");
  bytes[0] = 0x7f;
  EXPECT_TRUE(contains(read_error(write_temp("magic2.gguf", bytes)), "(magic '\\x7fGML' at offset 0)"));
}

TEST(GgufReader, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = small_file().bytes();
  for (std::size_t n = 0; n < full.size(); ++n) {
    const std::string path = write_temp("trunc.gguf", std::vector<uint8_t>(full.begin(), full.begin() + n));
    const std::string msg = read_error(path);
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "prefix of " << n << " bytes: " << msg;
  }
  // The length of the third token, "b", starts at offset 167; the prefix ends inside it.
  const std::string path = write_temp("trunc_tokens.gguf", std::vector<uint8_t>(full.begin(), full.begin() + 171));
  EXPECT_EQ(read_error(path), path +
                                  ": truncated at offset 167 while reading the value of key 'tokenizer.ggml.tokens' "
                                  "(array of 3 strings)");
  // Three tokens need at least 24 bytes; 19 are left after the count at offset 139.
  const std::string short_path = write_temp("trunc_count.gguf", std::vector<uint8_t>(full.begin(), full.begin() + 166));
  EXPECT_TRUE(contains(read_error(short_path), "3 elements cannot fit in the 19 bytes left"));
  const std::string empty = write_temp("trunc0.gguf", std::vector<uint8_t>{});
  EXPECT_EQ(read_error(empty), empty + ": truncated at offset 0 while reading the magic");
}

TEST(GgufReader, CorruptBytesGiveAnErrorOrAValidFile) {
  const std::vector<uint8_t> full = small_file().bytes();
  for (std::size_t i = 0; i < full.size(); ++i) {
    for (uint8_t v : {0x00, 0x80, 0xff}) {
      std::vector<uint8_t> bytes = full;
      bytes[i] = v;
      const std::string path = write_temp("corrupt.gguf", bytes);
      try {
        mo::gguf::read_metadata(path);
      } catch (const mo::Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
      }
    }
  }
}

TEST(GgufReader, RejectsImpossibleSizesBeforeAllocating) {
  Bytes key_len;
  key_len.header(3, 0, 1).u64(uint64_t{1} << 63).zeros(16);
  EXPECT_TRUE(contains(read_error(write_temp("keylen.gguf", key_len)),
                       "truncated at offset 24 while reading the key of metadata entry 0: string length "
                       "9223372036854775808 exceeds the 16 bytes left"));

  Bytes str_len = one_key("general.name", ValueType::string);
  str_len.u64(std::numeric_limits<uint64_t>::max()).zeros(8);
  EXPECT_TRUE(contains(read_error(write_temp("strlen.gguf", str_len)), "key 'general.name'"));

  Bytes count = one_key("tokenizer.ggml.tokens", ValueType::array);
  count.type(ValueType::string).u64(uint64_t{1} << 62).str("a");
  EXPECT_TRUE(contains(read_error(write_temp("count.gguf", count)),
                       "while reading the value of key 'tokenizer.ggml.tokens' (array of 4611686018427387904 "
                       "strings): 4611686018427387904 elements cannot fit in the 9 bytes left"));

  Bytes n_kv;
  n_kv.header(3, 0, uint64_t{1} << 60).zeros(64);
  EXPECT_TRUE(contains(read_error(write_temp("nkv.gguf", n_kv)), "declares 0 tensors and 1152921504606846976"));
  Bytes n_tensors;
  n_tensors.header(3, std::numeric_limits<uint64_t>::max(), 0);
  EXPECT_TRUE(contains(read_error(write_temp("ntensors.gguf", n_tensors)), "declares 18446744073709551615 tensors"));
}

TEST(GgufReader, RejectsBadMetadataEntries) {
  Bytes type = one_key("general.name", static_cast<ValueType>(13));
  type.zeros(8);
  EXPECT_TRUE(contains(read_error(write_temp("type.gguf", type)), "key 'general.name' has unknown value type 13 at offset 44"));

  Bytes elem = one_key("list", ValueType::array);
  elem.u32(99).u64(0);
  EXPECT_TRUE(contains(read_error(write_temp("elem.gguf", elem)), "key 'list' has unknown value type 99"));

  Bytes dup;
  dup.header(3, 0, 2).key("a", ValueType::u8).u8(1).key("a", ValueType::u8).u8(2);
  EXPECT_TRUE(contains(read_error(write_temp("dup.gguf", dup)), "duplicate metadata key 'a' at offset 38"));

  Bytes empty = one_key("", ValueType::u8);
  empty.u8(0);
  EXPECT_TRUE(contains(read_error(write_temp("emptykey.gguf", empty)), "metadata entry 0 at offset 24 has an empty key"));
}

TEST(GgufReader, LimitsArrayNesting) {
  auto nested = [](int levels) {
    Bytes b = one_key("deep", ValueType::array);
    for (int i = 1; i < levels; ++i) b.type(ValueType::array).u64(1);
    b.type(ValueType::u8).u64(1).u8(42);
    return b;
  };
  const mo::gguf::File f = mo::gguf::read_metadata(write_temp("nest3.gguf", nested(3)));
  EXPECT_EQ(f.find("deep")->as_array()[0].as_array()[0].as_array()[0].as_int(), 42);
  EXPECT_TRUE(contains(read_error(write_temp("nest100.gguf", nested(100))), "key 'deep' nests arrays more than 8 deep"));
}

TEST(GgufReader, RejectsBadTensorInfos) {
  Bytes dims;
  dims.str("t").u32(5);
  for (int i = 0; i < 5; ++i) dims.u64(1);
  dims.u32(kF32).u64(0);
  EXPECT_TRUE(
      contains(read_error(write_temp("dims.gguf", with_tensors(1, dims, 32))), "tensor 't' has 5 dimensions at offset 33 (at most 4)"));

  Bytes unknown;
  unknown.tensor("t", {32}, 4, 0);
  EXPECT_TRUE(
      contains(read_error(write_temp("ggml4.gguf", with_tensors(1, unknown, 32))), "tensor 't' has unknown ggml type 4 at offset 45"));

  Bytes row;
  row.tensor("t", {100, 2}, kQ4_K, 0);
  EXPECT_TRUE(contains(read_error(write_temp("row.gguf", with_tensors(1, row, 1024))),
                       "tensor 't' of type q4_K at offset 53 has rows of 100 weights, not a multiple of its block "
                       "size 256"));

  Bytes huge;
  huge.tensor("t", {uint64_t{1} << 62, 4}, kF32, 0);
  EXPECT_TRUE(contains(read_error(write_temp("huge.gguf", with_tensors(1, huge, 32))), "tensor 't' has more than INT64_MAX elements"));

  Bytes dup;
  dup.tensor("t", {8}, kF32, 0).tensor("t", {8}, kF32, 32);
  EXPECT_TRUE(contains(read_error(write_temp("duptensor.gguf", with_tensors(2, dup, 64))), "duplicate tensor name 't' at offset 57"));
}

TEST(GgufReader, RejectsBadTensorData) {
  Bytes misaligned;
  misaligned.tensor("blk.0.attn_q.weight", {4}, kF32, 4);
  EXPECT_TRUE(contains(read_error(write_temp("misaligned.gguf", with_tensors(1, misaligned, 64))),
                       "tensor 'blk.0.attn_q.weight' has data offset 4 at offset 67, not a multiple of the "
                       "alignment 32"));

  Bytes past_end;
  past_end.tensor("output.weight", {1024}, kF32, 0);
  EXPECT_TRUE(contains(read_error(write_temp("pastend.gguf", with_tensors(1, past_end, 16))),
                       "tensor 'output.weight' (offset field at offset 61) has 4096 bytes of data at data offset 0, "
                       "past the end of the file (112 bytes, data section from offset 96)"));

  Bytes far;
  far.tensor("t", {8}, kF32, uint64_t{1} << 63);
  EXPECT_TRUE(contains(read_error(write_temp("far.gguf", with_tensors(1, far, 32))), "past the end of the file"));

  Bytes overlap;
  overlap.tensor("a", {16}, kF32, 0).tensor("b", {8}, kF32, 32).tensor("empty", {0, 8}, kF32, 32);
  EXPECT_TRUE(contains(read_error(write_temp("overlap.gguf", with_tensors(3, overlap, 96))),
                       "tensors 'a' and 'b' overlap: data offsets [0, 64) and [32, 64)"));
}

TEST(GgufReader, HonoursGeneralAlignment) {
  Bytes kv;
  kv.key("general.alignment", ValueType::u32).u32(64);
  Bytes infos;
  infos.tensor("a", {4}, kF32, 0).tensor("b", {4}, kF32, 64);
  Bytes b;
  b.header(3, 2, 1);
  for (uint8_t c : kv.bytes()) b.u8(c);
  for (uint8_t c : infos.bytes()) b.u8(c);
  b.pad_to(64).zeros(64 + 16);
  const mo::gguf::File f = mo::gguf::read_metadata(write_temp("align64.gguf", b));
  EXPECT_EQ(f.alignment, 64u);
  EXPECT_EQ(f.data_offset, 128u);

  Bytes odd;
  odd.key("general.alignment", ValueType::u32).u32(48);
  EXPECT_TRUE(contains(read_error(write_temp("align48.gguf", with_tensors(0, Bytes{}, 0, odd, 1))),
                       "key 'general.alignment' at offset 24 is 48, not a power of two"));
  Bytes wide;
  wide.key("general.alignment", ValueType::u64).u64(64);
  EXPECT_TRUE(contains(read_error(write_temp("align_u64.gguf", with_tensors(0, Bytes{}, 0, wide, 1))),
                       "key 'general.alignment' at offset 24 is u64, expected u32"));
}

TEST(GgufReader, MissingFileIsUsageError) { EXPECT_THROW(mo::gguf::read_metadata("/nonexistent/model.gguf"), mo::UsageError); }

TEST(JsonFile, ReadsAnObject) {
  const std::string text = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})";
  const nlohmann::json j = mo::io::read_json(write_temp("config.json", std::vector<uint8_t>(text.begin(), text.end())));
  EXPECT_EQ(j.at("hidden_size").get<int>(), 64);
  EXPECT_EQ(j.at("architectures")[0].get<std::string>(), "LlamaForCausalLM");
}

TEST(JsonFile, ErrorsNameTheFileAndByte) {
  EXPECT_THROW(mo::io::read_json("/nonexistent/config.json"), mo::UsageError);
  const std::string text = "{\"a\": 1,\n \"b\": }";
  const std::string path = write_temp("bad.json", std::vector<uint8_t>(text.begin(), text.end()));
  try {
    mo::io::read_json(path);
    FAIL() << "no error";
  } catch (const mo::UsageError& e) {
    FAIL() << "a parse error is not a usage error: " << e.what();
  } catch (const mo::Error& e) {
    EXPECT_TRUE(contains(e.what(), path + ": invalid JSON at byte 16: line 2, column 7: syntax error while parsing "
                                          "value - unexpected '}'"));
  }
  EXPECT_THROW(mo::io::read_json(write_temp("empty.json", std::vector<uint8_t>{})), mo::Error);
}

// nlohmann reports a number beyond a double's range as out_of_range, not parse_error (a fuzzer found it).
TEST(JsonFile, ANumberTooLargeIsAnErrorNamingTheFile) {
  const std::string text = R"({"hidden_size": 64, "rope_theta": 1e99999})";
  const std::string path = write_temp("huge.json", std::vector<uint8_t>(text.begin(), text.end()));
  try {
    mo::io::read_json(path);
    FAIL() << "no error";
  } catch (const mo::Error& e) {
    EXPECT_TRUE(contains(e.what(), path + ": invalid JSON: number overflow parsing '1e99999'")) << e.what();
  }
}

// nlohmann's get<int>() converts 1e99 unchecked (undefined behaviour) and wraps 2^40: json_int refuses both.
TEST(JsonFile, IntegersOnlyWithinTheTargetRange) {
  using nlohmann::json;
  EXPECT_EQ(mo::json_int<std::int32_t>(json(-7), "f.json", "k"), -7);
  EXPECT_EQ(mo::json_int<std::uint64_t>(json(std::uint64_t{1} << 63), "f.json", "k"), std::uint64_t{1} << 63);
  const std::vector<std::pair<json, std::string>> bad = {
      {json(1e99), "f.json: 'k' must be an integer, got 1e+99"},
      {json(3.0), "f.json: 'k' must be an integer, got 3.0"},
      {json("4"), "f.json: 'k' must be an integer, got \"4\""},
      {json(std::int64_t{1} << 40), "f.json: 'k' is out of range (1099511627776)"},
      {json(std::uint64_t{1} << 63), "f.json: 'k' is out of range (9223372036854775808)"},
  };
  for (const auto& [v, want] : bad) {
    try {
      mo::json_int<std::int32_t>(v, "f.json", "k");
      ADD_FAILURE() << "no error for " << v.dump();
    } catch (const mo::UsageError& e) {
      EXPECT_EQ(std::string(e.what()), want);
    }
  }
  EXPECT_THROW(mo::json_int<std::uint32_t>(json(-1), "f.json", "k"), mo::UsageError);
}

}  // namespace
