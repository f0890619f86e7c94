#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "mo/io/safetensors.h"
#include "mo/quant/shard_writer.h"

namespace fs = std::filesystem;

namespace {
struct Dir {
  fs::path p = fs::temp_directory_path() / ("mo-shards-" + std::to_string(::getpid()));
  Dir() { fs::remove_all(p), fs::create_directories(p); }
  ~Dir() { fs::remove_all(p); }
};
}  // namespace

TEST(ShardWriter, FlushesShardsAsTheyFillAndWritesTheIndex) {
  Dir d;
  mo::quant::ShardWriter w(d.p.string(), 1000);
  std::vector<float> a(200, 1.0f), b(100, 2.0f), c(50, 3.0f);  // 800, 400, 200 bytes
  w.add("a", mo::st::Dtype::F32, {200}, a);
  w.add("b", mo::st::Dtype::F32, {100}, b);  // would pass 1000 bytes: "a" goes to shard 1 first
  w.add("c", mo::st::Dtype::F32, {50}, c);
  w.finish();
  EXPECT_TRUE(fs::exists(d.p / "model-00001-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(d.p / "model-00002-of-00002.safetensors"));
  EXPECT_FALSE(fs::exists(d.p / "model.safetensors"));
  auto m = mo::st::Model::open(d.p.string());
  ASSERT_EQ(m.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(m.total_bytes(), 1400u);
  EXPECT_EQ(w.bytes_written(), 1400u);
  for (const auto& e : fs::directory_iterator(d.p)) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(ShardWriter, OneShardIsModelSafetensors) {
  Dir d;
  mo::quant::ShardWriter w(d.p.string(), 1 << 20);
  std::vector<std::uint16_t> h(8, 0x3c00);
  w.add("x", mo::st::Dtype::F16, {2, 4}, h);
  w.finish();
  EXPECT_TRUE(fs::exists(d.p / "model.safetensors"));
  EXPECT_FALSE(fs::exists(d.p / "model.safetensors.index.json"));
  EXPECT_THROW(w.add("x", mo::st::Dtype::F16, {2, 4}, h), std::exception);
}
