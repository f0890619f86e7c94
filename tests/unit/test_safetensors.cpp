#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/mapped_file.h"
#include "mo/io/gguf.h"
#include "mo/io/safetensors.h"

#ifndef MO_SHARED_DATA
#error "MO_SHARED_DATA must be defined by the build as the path of the shared data folder"
#endif

namespace {

namespace fs = std::filesystem;
using mo::st::Dtype;
using Bytes = std::vector<std::uint8_t>;

// One folder per test process: ctest runs tests in parallel processes, each writing its own files.
class TempFolder {
 public:
  TempFolder() : path_(fs::path(::testing::TempDir()) / ("mo_st_test_" + std::to_string(::getpid()))) { fs::create_directories(path_); }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

const fs::path& temp_folder() {
  static const TempFolder folder;
  return folder.path();
}

// A fresh, empty subfolder of the temp folder.
std::string fresh_dir(const std::string& name) {
  const fs::path dir = temp_folder() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// Overwrites in place and then sets the size: truncating to 0 first makes the file system free and
// reallocate every block, 40 times slower for the mutation test's thousands of 1 MB files.
std::string write_bytes(const std::string& name, const Bytes& bytes) {
  const std::string path = (temp_folder() / name).string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return path;
  EXPECT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size())) << path;
  EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(bytes.size())), 0) << path;
  ::close(fd);
  return path;
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A file as stored: little-endian header length, the header text, then `data_bytes` bytes 0, 1, 2, ...
Bytes raw_file(const std::string& header, std::size_t data_bytes = 0) {
  Bytes b;
  b.reserve(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::uint8_t>(std::uint64_t{header.size()} >> (8 * i)));
  b.insert(b.end(), header.begin(), header.end());
  for (std::size_t i = 0; i < data_bytes; ++i) b.push_back(static_cast<std::uint8_t>(i));
  return b;
}

// The message of the mo::Error that opening `path` throws, or "(no error)".
std::string open_error(const std::string& path) {
  try {
    mo::st::File::open(path);
  } catch (const mo::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string header_error(const std::string& name, const std::string& header, std::size_t data_bytes = 0) {
  return open_error(write_bytes(name, raw_file(header, data_bytes)));
}

std::string model_error(const std::string& path) {
  try {
    mo::st::Model::open(path);
  } catch (const mo::Error& e) {
    return e.what();
  }
  return "(no error)";
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

Bytes view_bytes(const mo::st::TensorView& v) { return Bytes(v.data, v.data + v.nbytes); }

// Tensors that own their bytes, for the writer.
struct Owned {
  std::string name;
  Dtype dtype;
  std::vector<std::int64_t> shape;
  Bytes bytes;
};

std::vector<mo::st::TensorData> as_data(const std::vector<Owned>& owned) {
  std::vector<mo::st::TensorData> out;
  for (const Owned& o : owned) out.push_back({o.name, o.dtype, o.shape, o.bytes.data(), o.bytes.size()});
  return out;
}

// `numel` elements of `dtype`, bytes seeded by `seed` so every tensor differs.
Owned make_tensor(const std::string& name, Dtype dtype, std::vector<std::int64_t> shape, unsigned seed) {
  std::int64_t numel = 1;
  for (std::int64_t d : shape) numel *= d;
  Bytes b(static_cast<std::size_t>(numel) * mo::st::dtype_size(dtype));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(seed * 31 + i * 7);
  if (dtype == Dtype::BOOL) {
    for (auto& x : b) x &= 1;
  }
  return {name, dtype, std::move(shape), std::move(b)};
}

TEST(SafetensorsDtype, NamesSizesAndLookup) {
  const struct {
    Dtype dtype;
    const char* name;
    std::size_t size;
  } expected[] = {{Dtype::F64, "F64", 8},         {Dtype::F32, "F32", 4},         {Dtype::F16, "F16", 2}, {Dtype::BF16, "BF16", 2},
                  {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::F8_E5M2, "F8_E5M2", 1}, {Dtype::I64, "I64", 8}, {Dtype::I32, "I32", 4},
                  {Dtype::I16, "I16", 2},         {Dtype::I8, "I8", 1},           {Dtype::U8, "U8", 1},   {Dtype::BOOL, "BOOL", 1},
                  {Dtype::U64, "U64", 8},         {Dtype::U32, "U32", 4},         {Dtype::U16, "U16", 2}};
  for (const auto& e : expected) {
    EXPECT_STREQ(mo::st::dtype_name(e.dtype), e.name);
    EXPECT_EQ(mo::st::dtype_size(e.dtype), e.size) << e.name;
    EXPECT_EQ(mo::st::dtype_from_name(e.name), e.dtype) << e.name;
  }
  EXPECT_EQ(mo::st::dtype_from_name("f32"), std::nullopt);
  EXPECT_EQ(mo::st::dtype_from_name("F8_E8M0"), std::nullopt);
  EXPECT_EQ(mo::st::dtype_from_name(""), std::nullopt);
}

TEST(SafetensorsWriter, RoundTripsEveryDtype) {
  std::vector<Owned> owned;
  unsigned seed = 1;
  for (Dtype d : {Dtype::F64, Dtype::F32, Dtype::F16, Dtype::BF16, Dtype::F8_E4M3, Dtype::F8_E5M2, Dtype::I64, Dtype::I32, Dtype::I16,
                  Dtype::I8, Dtype::U8, Dtype::BOOL, Dtype::U64, Dtype::U32, Dtype::U16}) {
    owned.push_back(make_tensor(std::string("t.") + mo::st::dtype_name(d), d, {3, 5}, seed++));
  }
  owned.push_back(make_tensor("scalar", Dtype::F32, {}, seed++));
  owned.push_back(make_tensor("empty", Dtype::BF16, {0, 7}, seed++));
  const std::string path = (temp_folder() / "every_dtype.safetensors").string();
  mo::st::write_file(path, as_data(owned));

  const mo::st::File f = mo::st::File::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_TRUE(f.metadata().empty());
  ASSERT_EQ(f.tensors().size(), owned.size());
  for (const Owned& o : owned) {
    const mo::st::TensorView* v = f.find(o.name);
    ASSERT_NE(v, nullptr) << o.name;
    EXPECT_EQ(v->dtype, o.dtype) << o.name;
    EXPECT_EQ(v->shape, o.shape) << o.name;
    EXPECT_EQ(v->numel() * static_cast<std::int64_t>(mo::st::dtype_size(v->dtype)), static_cast<std::int64_t>(v->nbytes));
    EXPECT_EQ(view_bytes(*v), o.bytes) << o.name;
  }
  EXPECT_EQ(f.find("t.f32"), nullptr);
  // tensors() is in offset order and tiles the data section.
  const std::uint8_t* next = f.bytes().data() + f.data_offset();
  for (const mo::st::TensorView& v : f.tensors()) {
    EXPECT_EQ(v.data, next) << v.name;
    next += v.nbytes;
  }
  EXPECT_EQ(next, f.bytes().data() + f.bytes().size());
}

TEST(SafetensorsWriter, WritesTheReferenceBytes) {
  // The Rust crate's own test_serialization: "attn.0" F32 [1, 2, 3] holding 0..5.
  const float values[] = {0, 1, 2, 3, 4, 5};
  const std::string path = (temp_folder() / "reference.safetensors").string();
  mo::st::write_file(path, {{"attn.0", Dtype::F32, {1, 2, 3}, values, sizeof values}});
  const std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 64u);  // already a multiple of 8: no padding
  Bytes expected = raw_file(header);
  const auto* p = reinterpret_cast<const std::uint8_t*>(values);
  expected.insert(expected.end(), p, p + sizeof values);
  EXPECT_EQ(read_bytes(path), expected);

  // Layout: by dtype alignment, largest first, then by name; header padded with spaces.
  const std::vector<Owned> owned = {make_tensor("a", Dtype::U8, {1}, 1),   make_tensor("b", Dtype::F32, {1}, 2),
                                    make_tensor("a2", Dtype::F32, {1}, 3), make_tensor("z", Dtype::I64, {1}, 4),
                                    make_tensor("h", Dtype::BF16, {1}, 5), make_tensor("g", Dtype::F16, {1}, 6)};
  const std::string path2 = (temp_folder() / "layout.safetensors").string();
  mo::st::write_file(path2, as_data(owned), {{"zeta", "1"}, {"alpha", "x\"y\n"}});
  const std::string header2 = R"({"__metadata__":{"alpha":"x\"y\n","zeta":"1"},)"
                              R"("z":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
                              R"("a2":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]},)"
                              R"("h":{"dtype":"BF16","shape":[1],"data_offsets":[16,18]},)"
                              R"("g":{"dtype":"F16","shape":[1],"data_offsets":[18,20]},)"
                              R"("a":{"dtype":"U8","shape":[1],"data_offsets":[20,21]}})";
  const Bytes got = read_bytes(path2);
  ASSERT_GE(got.size(), 8u);
  std::uint64_t n = 0;
  std::memcpy(&n, got.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(std::string(got.begin() + 8, got.begin() + 8 + static_cast<std::ptrdiff_t>(n)),
            header2 + std::string((8 - header2.size() % 8) % 8, ' '));
  const mo::st::File f = mo::st::File::open(path2);
  const std::map<std::string, std::string> meta = {{"alpha", "x\"y\n"}, {"zeta", "1"}};
  EXPECT_EQ(f.metadata(), meta);
  std::vector<std::string> order;
  for (const auto& v : f.tensors()) order.push_back(v.name);
  EXPECT_EQ(order, (std::vector<std::string>{"z", "a2", "b", "h", "g", "a"}));
}

TEST(SafetensorsWriter, ReplacesAtomicallyAndLeavesNoTempFile) {
  const std::string dir = fresh_dir("atomic");
  const std::string path = dir + "/m.safetensors";
  const Owned a = make_tensor("a", Dtype::F32, {4}, 1);
  mo::st::write_file(path, as_data({a}));
  // Rewrite while the old file is mapped: the mapping keeps the old bytes, the path gets the new.
  const mo::st::File old = mo::st::File::open(path);
  const Owned b = make_tensor("a", Dtype::F32, {4}, 2);
  mo::st::write_file(path, as_data({b}));
  EXPECT_EQ(view_bytes(*old.find("a")), a.bytes);
  EXPECT_EQ(view_bytes(*mo::st::File::open(path).find("a")), b.bytes);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"m.safetensors"});

  // Inconsistent input: an Error naming the tensor, and nothing written.
  Owned bad = make_tensor("bad", Dtype::F32, {4}, 3);
  bad.bytes.resize(15);
  const std::string bad_path = dir + "/bad.safetensors";
  try {
    mo::st::write_file(bad_path, as_data({bad}));
    ADD_FAILURE() << "no error";
  } catch (const mo::Error& e) {
    EXPECT_EQ(std::string(e.what()), bad_path + ": tensor 'bad' of dtype F32 and shape [4] has 15 bytes of data, expected numel * 4");
  }
  EXPECT_THROW(mo::st::write_file(dir + "/dup.safetensors", as_data({a, a})), mo::Error);
  EXPECT_THROW(mo::st::write_file(dir + "/meta.safetensors", as_data({make_tensor("__metadata__", Dtype::U8, {1}, 1)})), mo::Error);
  EXPECT_THROW(mo::st::write_file(dir + "/neg.safetensors", {{"n", Dtype::U8, {-1}, nullptr, 0}}), mo::Error);
  EXPECT_FALSE(fs::exists(bad_path));
  EXPECT_THROW(mo::st::write_file(dir + "/missing/x.safetensors", as_data({a})), mo::UsageError);
  names.clear();
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"m.safetensors"});
}

TEST(SafetensorsSharding, SplitsBySizeAndWritesTheIndex) {
  const std::string dir = fresh_dir("sharded");
  // 100 floats = 400 bytes each, at most 1000 bytes per shard. Like huggingface_hub, a tensor above
  // the limit gets its own shard at once, ahead of the shard still being filled: [big] [w0 w1] [w2 w3] [w4].
  std::vector<Owned> owned;
  for (int i = 0; i < 5; ++i) owned.push_back(make_tensor("w" + std::to_string(i), Dtype::F32, {10, 10}, i));
  owned.insert(owned.begin() + 2, make_tensor("big", Dtype::F32, {300}, 9));  // 1200 bytes: a shard of its own
  mo::st::write_sharded(dir, as_data(owned), 1000, {{"format", "pt"}});

  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                             "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
                                             "model.safetensors.index.json"}));
  const Bytes index = read_bytes(dir + "/model.safetensors.index.json");
  EXPECT_EQ(std::string(index.begin(), index.end()),
            "{\n"
            "  \"metadata\": {\n"
            "    \"total_size\": 3200\n"
            "  },\n"
            "  \"weight_map\": {\n"
            "    \"big\": \"model-00001-of-00004.safetensors\",\n"
            "    \"w0\": \"model-00002-of-00004.safetensors\",\n"
            "    \"w1\": \"model-00002-of-00004.safetensors\",\n"
            "    \"w2\": \"model-00003-of-00004.safetensors\",\n"
            "    \"w3\": \"model-00003-of-00004.safetensors\",\n"
            "    \"w4\": \"model-00004-of-00004.safetensors\"\n"
            "  }\n"
            "}\n");
  const mo::st::File shard = mo::st::File::open(dir + "/model-00003-of-00004.safetensors");
  EXPECT_EQ(shard.metadata().at("format"), "pt");
  EXPECT_EQ(shard.tensors().size(), 2u);

  for (const std::string& path : {dir, dir + "/model.safetensors.index.json"}) {
    const mo::st::Model m = mo::st::Model::open(path);
    EXPECT_EQ(m.files().size(), 4u);
    EXPECT_EQ(m.names(), (std::vector<std::string>{"big", "w0", "w1", "w2", "w3", "w4"}));
    EXPECT_EQ(m.total_bytes(), 3200u);
    for (const Owned& o : owned) {
      const mo::st::TensorView* v = m.find(o.name);
      ASSERT_NE(v, nullptr) << o.name;
      EXPECT_EQ(v->shape, o.shape);
      EXPECT_EQ(view_bytes(*v), o.bytes) << o.name;
    }
    EXPECT_EQ(m.find("w5"), nullptr);
  }

  // Everything fits in one shard: one model.safetensors, and the stale index is removed.
  mo::st::write_sharded(dir, as_data(owned), 1 << 20);
  const mo::st::Model single = mo::st::Model::open(dir);
  ASSERT_EQ(single.files().size(), 1u);
  EXPECT_EQ(single.files()[0].path(), dir + "/model.safetensors");
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(single.names().size(), 6u);
  EXPECT_EQ(view_bytes(*mo::st::Model::open(dir + "/model.safetensors").find("w4")), owned.back().bytes);

  EXPECT_THROW(mo::st::write_sharded(dir + "/nope", as_data(owned), 1000), mo::UsageError);
  EXPECT_THROW(mo::st::write_sharded(dir, as_data(owned), 0), mo::UsageError);
}

TEST(SafetensorsModel, IndexErrorsNameTheIndexAndTensor) {
  const std::string dir = fresh_dir("bad_index");
  std::vector<Owned> owned;
  for (int i = 0; i < 3; ++i) owned.push_back(make_tensor("w" + std::to_string(i), Dtype::F16, {8}, i));
  mo::st::write_sharded(dir, as_data(owned), 16);
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string text = [&] {
    const Bytes b = read_bytes(index);
    return std::string(b.begin(), b.end());
  }();

  auto rewrite = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    std::ofstream(index, std::ios::trunc) << t;
  };
  rewrite("\"w1\": \"model-00002-of-00003", "\"w1\": \"model-00009-of-00003");
  EXPECT_EQ(model_error(dir),
            index + ": shard 'model-00009-of-00003.safetensors' of tensor 'w1' not found: " + dir + "/model-00009-of-00003.safetensors");
  EXPECT_THROW(mo::st::Model::open(dir), mo::UsageError);

  rewrite("\"w1\": \"model-00002-of-00003", "\"w1\": \"model-00003-of-00003");
  EXPECT_EQ(model_error(index), index + ": tensor 'w1' is mapped to shard 'model-00003-of-00003.safetensors', which has no such tensor");

  rewrite("\"weight_map\"", "\"weights\"");
  EXPECT_TRUE(contains(model_error(index), index + ": expected a JSON object with a 'weight_map' object"));
  rewrite("\"model-00001-of-00003.safetensors\"", "3");
  EXPECT_TRUE(contains(model_error(index), "tensor 'w0' maps to 3, expected a shard file name"));
  std::ofstream(index, std::ios::trunc) << "{\"weight_map\": {";
  EXPECT_TRUE(contains(model_error(index), index + ": invalid JSON at byte"));

  // A corrupt shard reports the shard itself.
  std::ofstream(index, std::ios::trunc) << text;
  write_bytes("bad_index/model-00002-of-00003.safetensors", raw_file("{}", 1));
  EXPECT_TRUE(contains(model_error(dir), dir + "/model-00002-of-00003.safetensors: tensors cover 0 bytes"));

  const std::string empty = fresh_dir("empty_model");
  EXPECT_EQ(model_error(empty), empty + ": no model.safetensors or model.safetensors.index.json in this directory");
  EXPECT_THROW(mo::st::Model::open(empty), mo::UsageError);
  EXPECT_THROW(mo::st::Model::open(empty + "/missing.safetensors"), mo::UsageError);
}

TEST(SafetensorsReader, AcceptsWhatTheReferenceAccepts) {
  // Each of these loads in safetensors 0.8 (safetensors.deserialize).
  EXPECT_EQ(header_error("ok_empty.st", "{}"), "(no error)");
  EXPECT_EQ(header_error("ok_ws.st", " {\t}\r\n  "), "(no error)");
  EXPECT_EQ(header_error("ok_null_meta.st", R"({"__metadata__":null})"), "(no error)");
  EXPECT_EQ(header_error("ok_extra.st", R"({"a":{"x":[{"y":null},true,-1.5e3],"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 2),
            "(no error)");
  // Zero-size tensors may sit at any boundary, even together; scalars have shape [].
  EXPECT_EQ(header_error("ok_zero.st",
                         R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                         R"("z1":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},)"
                         R"("z2":{"dtype":"F32","shape":[3,0],"data_offsets":[1,1]},)"
                         R"("s":{"dtype":"F32","shape":[],"data_offsets":[1,5]}})",
                         5),
            "(no error)");
  // Tensors need not be aligned; escapes in names decode.
  const std::string path =
      write_bytes("ok_unaligned.st", raw_file(R"({"a\u00e9\ud83d\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[1,5]}})",
                                              5));
  const mo::st::File f = mo::st::File::open(path);
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[0].name, "a\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(f.find("b")->data, f.bytes().data() + f.data_offset() + 1);
}

TEST(SafetensorsReader, RejectsBadHeaderLengths) {
  const std::string tiny = write_bytes("tiny.st", Bytes{1, 0, 0});
  EXPECT_EQ(open_error(tiny), tiny + ": file is 3 bytes, too short for the 8-byte header length");
  Bytes huge = raw_file("{}");
  std::memset(huge.data(), 0xff, 8);
  const std::string huge_path = write_bytes("huge.st", huge);
  EXPECT_EQ(open_error(huge_path), huge_path + ": header length 18446744073709551615 at offset 0 is above the limit of 100000000 bytes");
  Bytes past = raw_file("{}");
  past[0] = 3;
  const std::string past_path = write_bytes("past.st", past);
  EXPECT_EQ(open_error(past_path), past_path + ": header length 3 at offset 0 runs past the end of the file (10 bytes)");
  EXPECT_TRUE(contains(header_error("zero.st", ""),
                       "header: expected '{' (a JSON object), got the end of the header "
                       "at offset 8"));
  EXPECT_THROW(mo::st::File::open((temp_folder() / "no_such.safetensors").string()), mo::UsageError);
}

TEST(SafetensorsReader, RejectsInvalidJson) {
  EXPECT_TRUE(contains(header_error("json1.st", R"({"a":})"),
                       "tensor 'a': expected an object with dtype, shape and data_offsets, got '}' at offset 13"));
  EXPECT_TRUE(contains(header_error("json2.st", "[]"), "header: expected '{' (a JSON object), got an array at offset 8"));
  EXPECT_TRUE(
      contains(header_error("json3.st", "{} x"), "header: expected the end of the header after the JSON object, got 'x' at offset 11"));
  EXPECT_TRUE(contains(header_error("json4.st", std::string("{}\0", 3)), "after the JSON object, got byte 0x00"));
  EXPECT_TRUE(contains(header_error("json5.st", "{\"a\xff\":1}"), "header is not valid UTF-8 at offset 11"));
  EXPECT_TRUE(contains(header_error("json6.st", "{\"a\nb\":1}"), "control character 0x0a inside a string at offset 11"));
  EXPECT_TRUE(contains(header_error("json7.st", R"({"\ud800":1})"), "lone high surrogate"));
  EXPECT_TRUE(contains(header_error("json8.st", R"({"a)"), "header key: unterminated string at offset 9"));
  EXPECT_TRUE(contains(header_error("json9.st", R"({"a":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}})", 1),
                       "tensor 'a' shape: invalid number"));
  // Nesting is bounded, so a deep header is an error rather than a stack overflow.
  const std::string deep =
      R"({"a":{"x":)" + std::string(100000, '[') + std::string(100000, ']') + R"(,"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  EXPECT_TRUE(contains(header_error("deep.st", deep, 1), "tensor 'a' field 'x': JSON nested more than 128 deep at offset 144"));
}

TEST(SafetensorsReader, RejectsBadEntries) {
  auto entry = [](const std::string& body) { return R"({"w":)" + body + "}"; };
  EXPECT_TRUE(contains(header_error("e1.st", entry(R"({"dtype":"Q4","shape":[1],"data_offsets":[0,1]})"), 1),
                       "tensor 'w': unknown or unsupported dtype 'Q4' at offset 22"));
  EXPECT_TRUE(contains(header_error("e2.st", entry(R"({"dtype":"U8","shape":[1]})"), 1), "tensor 'w' has no 'data_offsets' at offset 9"));
  EXPECT_TRUE(contains(header_error("e3.st", entry(R"({"dtype":"U8","shape":"1","data_offsets":[0,1]})"), 1),
                       "tensor 'w' shape: expected an array of integers, got a string at offset 35"));
  EXPECT_TRUE(contains(header_error("e4.st", entry(R"({"dtype":"U8","shape":[-1],"data_offsets":[0,1]})"), 1),
                       "tensor 'w' shape: expected a non-negative integer, got -1 at offset 36"));
  EXPECT_TRUE(contains(header_error("e5.st", entry(R"({"dtype":"U8","shape":[1.0],"data_offsets":[0,1]})"), 1),
                       "expected a non-negative integer, got 1.0"));
  EXPECT_TRUE(contains(header_error("e6.st", entry(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1,2]})"), 1),
                       "tensor 'w' data_offsets: expected ']' (an array of 2 integers), got ','"));
  EXPECT_TRUE(contains(header_error("e7.st", entry(R"({"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551616]})"), 1),
                       "tensor 'w' data_offsets: integer 18446744073709551616 is above 2^64 - 1"));
  EXPECT_TRUE(contains(header_error("e8.st", entry(R"({"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]})"), 1),
                       "tensor 'w': duplicate field 'dtype' at offset 27"));
  EXPECT_TRUE(contains(header_error("e9.st", entry("null")),
                       "tensor 'w': expected an object with dtype, shape and "
                       "data_offsets, got null at offset 13"));
  EXPECT_TRUE(contains(header_error("e10.st", R"({"__metadata__":{"k":1}})"),
                       "__metadata__ key 'k': expected a string, got a number at offset 29"));
  EXPECT_TRUE(contains(header_error("e11.st", R"({"__metadata__":{},"__metadata__":{}})"), "duplicate key '__metadata__' at offset 27"));
  EXPECT_TRUE(contains(header_error("e12.st",
                                    R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                    R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                    2),
                       "duplicate tensor 'w' at offset 61"));
}

TEST(SafetensorsReader, RejectsBadOffsets) {
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  // Byte count disagrees with dtype and shape.
  const std::string mismatch = write_bytes("mismatch.st", raw_file(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20));
  EXPECT_EQ(open_error(mismatch), mismatch +
                                      ": tensor 'a' (at offset 9): dtype F32 and shape [2, 3] need 24 bytes but data_offsets [0, 20] "
                                      "hold 20");
  // End past the data section.
  const std::string past =
      write_bytes("past_end.st", raw_file(R"({"lm_head.weight":{"dtype":"U8","shape":[10],"data_offsets":[10,20]}})", 12));
  EXPECT_EQ(open_error(past), past +
                                  ": tensor 'lm_head.weight' (at offset 9): data_offsets [10, 20] end past the data "
                                  "section (12 bytes from offset 77)");
  EXPECT_TRUE(contains(header_error("backwards.st", R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[1,0]}})", 1),
                       "tensor 'a' (at offset 9): data_offsets [1, 0] end before they begin"));
  EXPECT_TRUE(contains(header_error("overlap.st", "{" + a + R"(,"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", 8),
                       "tensor 'b' (at offset 62): data_offsets [4, 8] overlap tensor 'a' at [0, 8]"));
  EXPECT_TRUE(contains(header_error("gap.st", "{" + a + R"(,"b":{"dtype":"U8","shape":[4],"data_offsets":[12,16]}})", 16),
                       "tensor 'b' (at offset 62): data_offsets [12, 16] leave bytes [8, 12) of the data section unused"));
  EXPECT_TRUE(contains(header_error("gap0.st", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", 8),
                       "leave bytes [0, 4) of the data section unused"));
  EXPECT_TRUE(contains(header_error("trailing.st", "{" + a + "}", 9),
                       "tensors cover 8 bytes but the data section from offset 62 has 9; bytes [8, 9) are unused"));
  EXPECT_TRUE(contains(header_error("overflow.st", R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})"),
                       "tensor 'a' (at offset 9): shape [4611686018427387904, 4] of F32 overflows 64 bits in bytes"));
  EXPECT_TRUE(contains(header_error("bigdim.st", R"({"a":{"dtype":"U8","shape":[0,18446744073709551615],"data_offsets":[0,0]}})"),
                       "has a dimension above INT64_MAX"));
}

// ---- Mutation test: thousands of corrupted copies of a real file load cleanly or fail cleanly. ----

struct Mutator {
  explicit Mutator(const Bytes& base) : base_(base) {
    std::memcpy(&header_len_, base.data(), 8);
    header_ = std::string(base.begin() + 8, base.begin() + 8 + static_cast<std::ptrdiff_t>(header_len_));
    data_ = Bytes(base.begin() + 8 + static_cast<std::ptrdiff_t>(header_len_), base.end());
  }

  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
  bool coin() { return pick(2) == 0; }

  // A file made of `header`; with `fix_length` the length field matches it, else it is the original.
  Bytes assemble(const std::string& header, bool fix_length) const {
    Bytes b = raw_file(header);
    if (!fix_length) std::memcpy(b.data(), &header_len_, 8);
    b.insert(b.end(), data_.begin(), data_.end());
    return b;
  }

  // Digit runs of the header: (position, length).
  std::vector<std::pair<std::size_t, std::size_t>> numbers() const {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (std::size_t i = 0; i < header_.size();) {
      if (header_[i] >= '0' && header_[i] <= '9') {
        std::size_t j = i;
        while (j < header_.size() && header_[j] >= '0' && header_[j] <= '9') ++j;
        out.emplace_back(i, j - i);
        i = j;
      } else {
        ++i;
      }
    }
    return out;
  }

  // Returns the mutated file; `data_only` is set when only tensor bytes changed (must still load).
  Bytes mutate(int kind, bool& data_only) {
    data_only = false;
    Bytes b = base_;
    const std::size_t data_at = 8 + header_len_;
    switch (kind) {
      case 0: {  // truncate, mostly inside or near the header
        const std::size_t n = coin() ? pick(data_at + 64) : pick(b.size());
        b.resize(n);
        return b;
      }
      case 1: {  // overwrite random header bytes with random values
        for (std::size_t k = 1 + pick(4); k > 0; --k) b[pick(data_at)] = static_cast<std::uint8_t>(pick(256));
        return b;
      }
      case 2: {  // flip single bits in the header
        for (std::size_t k = 1 + pick(3); k > 0; --k) b[pick(data_at)] ^= static_cast<std::uint8_t>(1u << pick(8));
        return b;
      }
      case 3: {  // corrupt tensor data: the header still describes a valid file
        data_only = true;
        for (std::size_t k = 1 + pick(16); k > 0; --k) b[data_at + pick(b.size() - data_at)] ^= 0xff;
        return b;
      }
      case 4: {  // absurd header lengths
        const std::uint64_t size = b.size();
        const std::uint64_t choices[] = {
            0,    1,         7,         header_len_ - 1,        header_len_ + 1,        header_len_ + 8,   size - 8,
            size, 100000000, 100000001, std::uint64_t{1} << 32, std::uint64_t{1} << 63, ~std::uint64_t{0}, rng_()};
        const std::uint64_t v = choices[pick(std::size(choices))];
        std::memcpy(b.data(), &v, 8);
        return b;
      }
      case 5: {  // a number in the JSON replaced with a huge, negative, fractional or borrowed one
        const auto nums = numbers();
        const auto [at, len] = nums[pick(nums.size())];
        static const char* const kValues[] = {"0",
                                              "1",
                                              "18446744073709551615",
                                              "18446744073709551616",
                                              "9223372036854775807",
                                              "9223372036854775808",
                                              "4294967296",
                                              "-1",
                                              "1e3",
                                              "1.5",
                                              "99999999999999999999999999",
                                              "00"};
        std::string v = coin() ? kValues[pick(std::size(kValues))] : [&] {
          const auto [o_at, o_len] = nums[pick(nums.size())];
          return header_.substr(o_at, o_len);
        }();
        std::string h = header_;
        h.replace(at, len, v);
        return assemble(h, pick(4) != 0);
      }
      case 6: {  // another dtype, spelled right or wrong
        static const char* const kDtypes[] = {"F64", "F16",     "BF16", "I64", "I32", "I8",  "U8",        "BOOL",
                                              "U64", "F8_E4M3", "Q4",   "",    "f32", "C64", "F32\\u0000"};
        std::string h = header_;
        std::size_t at = h.find("\"F32\"");
        for (std::size_t skip = pick(40); skip > 0 && h.find("\"F32\"", at + 1) != std::string::npos; --skip) {
          at = h.find("\"F32\"", at + 1);
        }
        h.replace(at + 1, 3, kDtypes[pick(std::size(kDtypes))]);
        return assemble(h, pick(4) != 0);
      }
      case 7: {  // insert a JSON token or a bad byte
        static const char* const kTokens[] = {"{",       "}",    "[",    "]", ",", ":",    "\"",   "\\", "\\u",
                                              "\\ud800", "null", "true", "1", "-", "\xff", "\xc3", " ",  "\"__metadata__\":{},",
                                              "[[[["};
        std::string h = header_;
        h.insert(pick(h.size() + 1), kTokens[pick(std::size(kTokens))]);
        return assemble(h, pick(4) != 0);
      }
      case 8: {  // delete a short range of the header
        std::string h = header_;
        const std::size_t at = pick(h.size());
        h.erase(at, 1 + pick(16));
        return assemble(h, pick(4) != 0);
      }
      default: {  // trailing bytes after the last tensor
        for (std::size_t k = 1 + pick(64); k > 0; --k) b.push_back(static_cast<std::uint8_t>(pick(256)));
        return b;
      }
    }
  }

  const Bytes& base_;
  std::uint64_t header_len_ = 0;
  std::string header_;
  Bytes data_;
  std::mt19937_64 rng_{20240607};
};

TEST(SafetensorsReader, MutatedCopiesOfARealFileLoadOrFailCleanly) {
  const std::string gguf_path = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!fs::exists(gguf_path)) GTEST_SKIP() << gguf_path << " not found";
  // The real weights of stories260K (all F32), with GGUF's ne reversed into a row-major shape.
  const mo::gguf::File gguf = mo::gguf::read_metadata(gguf_path);
  const mo::MappedFile mapped(gguf_path);
  std::vector<mo::st::TensorData> tensors;
  for (const mo::gguf::TensorInfo& t : gguf.tensors) {
    ASSERT_EQ(t.type, 0u) << t.name;
    std::vector<std::int64_t> shape(t.ne.rbegin(), t.ne.rend());
    tensors.push_back({t.name, Dtype::F32, shape, mapped.data() + gguf.data_offset + t.offset, t.n_bytes()});
  }
  const std::string base_path = (temp_folder() / "stories260K.safetensors").string();
  mo::st::write_file(base_path, tensors, {{"format", "pt"}, {"source", "stories260K.gguf"}});
  const Bytes base = read_bytes(base_path);
  {
    const mo::st::File f = mo::st::File::open(base_path);
    ASSERT_EQ(f.tensors().size(), 48u);
    const mo::st::TensorView* emb = f.find("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->shape, (std::vector<std::int64_t>{512, 64}));
    EXPECT_EQ(std::memcmp(emb->data, mapped.data() + gguf.data_offset, emb->nbytes), 0);
  }

  Mutator mutator(base);
  constexpr int kKinds = 10, kPerKind = 330;
  const std::string path = (temp_folder() / "mutant.safetensors").string();
  int loads = 0, errors = 0;
  int errors_by_kind[kKinds] = {};
  for (int i = 0; i < kKinds * kPerKind; ++i) {
    const int kind = i % kKinds;
    bool data_only = false;
    const Bytes bytes = mutator.mutate(kind, data_only);
    write_bytes("mutant.safetensors", bytes);
    try {
      const mo::st::File f = mo::st::File::open(path);
      ++loads;
      // Every view lies inside the mapping, the views tile the data section, sizes agree.
      const std::uint8_t* begin = f.bytes().data();
      const std::uint8_t* end = begin + f.bytes().size();
      std::size_t total = 0;
      for (const mo::st::TensorView& v : f.tensors()) {
        ASSERT_GE(v.data, begin + f.data_offset()) << "mutation " << i << " tensor " << v.name;
        ASSERT_LE(v.nbytes, static_cast<std::size_t>(end - v.data)) << "mutation " << i << " tensor " << v.name;
        ASSERT_EQ(static_cast<std::size_t>(v.numel()) * mo::st::dtype_size(v.dtype), v.nbytes) << "mutation " << i;
        total += v.nbytes;
      }
      ASSERT_EQ(total, f.bytes().size() - f.data_offset()) << "mutation " << i;
      if (data_only) {
        ASSERT_EQ(f.tensors().size(), 48u);
      }
    } catch (const mo::Error& e) {
      ++errors;
      ASSERT_FALSE(data_only) << "mutation " << i << " only changed tensor data: " << e.what();
      ASSERT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << "mutation " << i << ": " << e.what();
      ++errors_by_kind[kind];
    }
  }
  std::cout << "[ mutation ] " << kKinds * kPerKind << " mutated files: " << loads << " loaded, " << errors
            << " errors; errors per kind (of " << kPerKind << "):";
  for (int k : errors_by_kind) std::cout << " " << k;
  std::cout << "\n";
  EXPECT_EQ(loads + errors, kKinds * kPerKind);
  // Data-only corruption (330) always loads; most header corruption fails.
  EXPECT_GE(loads, kPerKind);
  EXPECT_GE(errors, 2000);
}

}  // namespace
