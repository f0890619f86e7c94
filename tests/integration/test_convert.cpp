// Round trips through `convert` on the real stories260K model, as a user would run them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "mo/convert/convert.h"
#include "mo/core/error.h"
#include "mo/io/gguf.h"
#include "mo/io/json_file.h"
#include "mo/model/model_files.h"
#include "mo/tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

const std::string kStories = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " not found";
    dir_ = fs::temp_directory_path() /
           ("mo_convert_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(ConvertTest, GgufToHfToGgufGivesIdenticalTensors) {
  const std::string hf = (dir_ / "hf").string(), back = (dir_ / "back.gguf").string();
  auto r1 = mo::convert::convert_model(kStories, hf, {});
  EXPECT_EQ(r1.output_format, "hf");
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    EXPECT_TRUE(fs::exists(fs::path(hf) / f)) << f;
  auto config = mo::io::read_json((fs::path(hf) / "config.json").string());
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["num_key_value_heads"], 4);
  EXPECT_EQ(config["intermediate_size"], 172);
  EXPECT_EQ(config["torch_dtype"], "float32");

  mo::convert::convert_model(hf, back, {});
  auto a = mo::gguf::read_metadata(kStories), b = mo::gguf::read_metadata(back);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& t : a.tensors) {
    const auto* u = b.find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->ne, t.ne) << t.name;
    EXPECT_EQ(u->type, t.type) << t.name;
    auto x = a.tensor_bytes(t), y = b.tensor_bytes(*u);
    ASSERT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << t.name << " differs after the round trip";
  }
  for (const char* key :
       {"llama.block_count", "llama.embedding_length", "llama.feed_forward_length", "llama.attention.head_count",
        "llama.attention.head_count_kv", "llama.context_length", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"})
    EXPECT_EQ(a.get_int(key), b.get_int(key)) << key;
}

TEST_F(ConvertTest, HfTokenizerGivesTheGgufIdsOnTinyStories) {
  const std::string hf = (dir_ / "hf").string();
  mo::convert::convert_model(kStories, hf, {});
  auto gguf_tok = mo::tok::load_tokenizer_gguf(mo::gguf::read_metadata(kStories));
  auto hf_tok = mo::tok::load_tokenizer_json(hf);
  std::ifstream in(std::string(MO_SHARED_DATA) + "/text/tinystories-sample.txt");
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ASSERT_EQ(hf_tok->encode(line), gguf_tok->encode(line)) << line;
    ++lines;
  }
  EXPECT_GT(lines, 5);
}

TEST_F(ConvertTest, F16OutputDequantizesAndRoundsEveryTensor) {
  const std::string hf = (dir_ / "hf16").string();
  mo::convert::ConvertOptions opt;
  opt.dtype = "f16";
  mo::convert::convert_model(kStories, hf, opt);
  auto m = mo::model::ModelFiles::open(hf);
  for (const auto& t : m.tensors()) EXPECT_EQ(t.dtype, "f16") << t.file_name;
  EXPECT_EQ(mo::io::read_json((fs::path(hf) / "config.json").string())["torch_dtype"], "float16");
}

TEST_F(ConvertTest, F16GgufRoundTripIsBitExact) {
  // F32 GGUF -> HF -> F16 GGUF gives an F16 model; that one through HF and back must not change a bit.
  const std::string hf = (dir_ / "hf").string(), f16 = (dir_ / "f16.gguf").string();
  const std::string hf2 = (dir_ / "hf2").string(), back = (dir_ / "back.gguf").string();
  mo::convert::convert_model(kStories, hf, {});
  mo::convert::ConvertOptions to_f16;
  to_f16.dtype = "f16";
  mo::convert::convert_model(hf, f16, to_f16);
  mo::convert::convert_model(f16, hf2, {});
  mo::convert::convert_model(hf2, back, {});
  auto a = mo::gguf::read_metadata(f16), b = mo::gguf::read_metadata(back);
  EXPECT_EQ(a.get_int("general.file_type"), 1);  // MOSTLY_F16
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& t : a.tensors) {
    const auto* u = b.find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->type, t.type) << t.name;
    auto x = a.tensor_bytes(t), y = b.tensor_bytes(*u);
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << t.name;
  }
}

TEST_F(ConvertTest, NeverOverwritesWhatTheUserHad) {
  const fs::path mine = dir_ / "mine";
  fs::create_directories(mine);
  std::ofstream(mine / "notes.txt") << "keep me";
  try {
    mo::convert::convert_model(kStories, mine.string(), {});
    FAIL();
  } catch (const mo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
  mo::convert::ConvertOptions force;
  force.force = true;
  EXPECT_THROW(mo::convert::convert_model(kStories, mine.string(), force), mo::UsageError);
  EXPECT_TRUE(fs::exists(mine / "notes.txt"));

  // An earlier output of ours may be replaced with --force: an F16 copy becomes what a fresh F32 run writes.
  const std::string hf = (dir_ / "hf").string(), fresh = (dir_ / "fresh").string();
  mo::convert::ConvertOptions f16;
  f16.dtype = "f16";
  mo::convert::convert_model(kStories, hf, f16);
  ASSERT_EQ(mo::io::read_json((fs::path(hf) / "config.json").string())["torch_dtype"], "float16");
  mo::convert::convert_model(kStories, hf, force);
  mo::convert::convert_model(kStories, fresh, {});
  EXPECT_EQ(mo::io::read_json((fs::path(hf) / "config.json").string())["torch_dtype"], "float32");
  const auto replaced = mo::model::ModelFiles::open(hf);
  for (const auto& t : replaced.tensors()) EXPECT_EQ(t.dtype, "f32") << t.file_name;
  EXPECT_EQ(slurp(fs::path(hf) / "model.safetensors"), slurp(fs::path(fresh) / "model.safetensors"));
  // ... but never the input, even with --force.
  EXPECT_THROW(mo::convert::convert_model(hf, hf, force), mo::UsageError);
  EXPECT_THROW(mo::convert::convert_model(hf, (fs::path(hf) / "inside.gguf").string(), force), mo::UsageError);
}

}  // namespace
