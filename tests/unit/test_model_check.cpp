// model::check_model, the one check of whether a model loads, on stories260K rewritten with one change.
#include "mo/model/model_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>

#include "mo/core/error.h"
#include "mo/io/gguf.h"
#include "mo/io/gguf_writer.h"

namespace {

namespace fs = std::filesystem;
using mo::gguf::Value;

const std::string kStories = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";

class ModelCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::ifstream(kStories)) GTEST_SKIP() << kStories << " not found";
    dir_ = fs::temp_directory_path() / ("mo-model-check-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // stories260K with `edit` applied to its metadata and tensor list before writing.
  std::string rewritten(const std::string& name, const std::function<void(mo::gguf::Writer&)>& edit) {
    const mo::gguf::File in = mo::gguf::read_metadata(kStories);
    const std::string out = (dir_ / name).string();
    mo::gguf::Writer w(out);
    for (const auto& [k, v] : in.metadata) w.set(k, v);
    for (const auto& t : in.tensors) w.add_tensor(t.name, t.ne, t.type, in.tensor_bytes(t));
    edit(w);
    w.write();
    return out;
  }

  static std::string error_of(const std::string& path, mo::model::TokenizerUse use = mo::model::TokenizerUse::required) {
    try {
      mo::model::check_model(mo::model::ModelFiles::open(path), use);
    } catch (const mo::Error& e) {
      return e.what();
    }
    return "(no error)";
  }

  fs::path dir_;
};

TEST_F(ModelCheck, Stories260KPassesAndGivesItsTokenizer) {
  const auto tok = mo::model::check_model(mo::model::ModelFiles::open(kStories), mo::model::TokenizerUse::required);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 512);
}

TEST_F(ModelCheck, ALayerPastTheBlockCountIsRefusedNotDropped) {
  const auto path = rewritten("bc4.gguf", [](mo::gguf::Writer& w) { w.set("llama.block_count", Value::u32(4)); });
  EXPECT_EQ(error_of(path), path + ": tensor 'blk.4.attn_q.weight' belongs to layer 4, but llama.block_count is 4 (layers 0 to 3)");
}

TEST_F(ModelCheck, TokenIdsPastTheEmbeddingAreRefusedNamingTheToken) {
  const auto path = rewritten("tok.gguf", [](mo::gguf::Writer& w) {
    for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
      auto items = w.find(key)->as_array();
      items.push_back(items.back());
      if (key == std::string("tokenizer.ggml.tokens")) items.back() = Value::str("<extra>");
      const auto type = items.front().type;
      w.set(key, Value::array(type, std::move(items)));
    }
  });
  EXPECT_EQ(error_of(path), path + ": token '<extra>' has id 512, outside the model's vocabulary of 512 (token_embd.weight rows)");
}

TEST_F(ModelCheck, ATokenizerIsNeededOnlyWhereTextIsTurnedIntoTokens) {
  const auto path = rewritten("notok.gguf", [](mo::gguf::Writer& w) { w.remove("tokenizer.ggml.model"); });
  EXPECT_EQ(error_of(path), path + ": the model has no tokenizer (no tokenizer.ggml.model key)");
  EXPECT_EQ(mo::model::check_model(mo::model::ModelFiles::open(path), mo::model::TokenizerUse::optional), nullptr);
}

TEST_F(ModelCheck, ATensorOfTheWrongShapeIsNamedWithBothShapes) {
  static const std::vector<std::uint8_t> zeros(32 * 4);
  const auto path = rewritten("shape.gguf", [](mo::gguf::Writer& w) { w.add_tensor("blk.0.attn_q.bias", {32}, 0, zeros); });
  EXPECT_EQ(error_of(path), path + ": tensor 'blk.0.attn_q.bias': expected shape [64], found [32]");
}

}  // namespace
