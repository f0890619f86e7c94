#include <gtest/gtest.h>

#include "vocab_vectors.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/io/gguf.h"
#include "mo/tokenizer/tokenizer.h"

#ifndef MO_SHARED_DATA
#error "MO_SHARED_DATA must be defined by the build as the path of the shared data folder"
#endif

namespace {

namespace fs = std::filesystem;
using mo::tok::Tokenizer;
using Ids = std::vector<std::int32_t>;

const std::string kData = MO_SHARED_DATA;
const std::string kVocabDir = kData + "/tokenizers/llama-cpp-vocab";
const std::string kLlama2Json = kData + "/tokenizers/hf/llama2";
const std::string kStories = kData + "/models/stories260K.gguf";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Tokenizer> load_gguf(const std::string& path) { return mo::tok::load_tokenizer_gguf(mo::gguf::read_metadata(path)); }

std::string show(const Ids& ids) {
  std::string s;
  for (auto id : ids) s += std::to_string(id) + " ";
  return s;
}

void expect_vocab_vectors(const std::string& name) {
  const std::string path = kVocabDir + "/ggml-vocab-" + name + ".gguf";
  if (!fs::exists(path)) GTEST_SKIP() << path << " not found";
  auto tok = load_gguf(path);
  ASSERT_EQ(tok->kind(), "spm");
  const auto cases = mo::test::read_vocab_vectors(path);
  ASSERT_GT(cases.size(), 40u);
  std::size_t passed = 0;
  for (const auto& c : cases) {
    // Like test-tokenizer-0: add_special = false, parse_special = false.
    const Ids got = tok->encode(c.input, false, false);
    if (got == c.expected) {
      ++passed;
    } else {
      ADD_FAILURE() << name << ": '" << c.input << "'\n  expected " << show(c.expected) << "\n  got      " << show(got);
    }
  }
  EXPECT_EQ(passed, cases.size()) << name;
  std::cout << "[ vectors  ] " << name << ": " << passed << "/" << cases.size() << " passed\n";
}

TEST(TokenizerSpmGguf, LlamaSpmVocabVectors) { expect_vocab_vectors("llama-spm"); }
TEST(TokenizerSpmGguf, Phi3VocabVectors) { expect_vocab_vectors("phi-3"); }

TEST(TokenizerSpmGguf, LlamaSpmSpecialTokensAndBos) {
  const std::string path = kVocabDir + "/ggml-vocab-llama-spm.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << path << " not found";
  auto tok = load_gguf(path);
  EXPECT_EQ(tok->special().bos, 1);
  EXPECT_EQ(tok->special().eos, 2);
  EXPECT_TRUE(tok->special().add_bos);
  EXPECT_EQ(tok->encode("Hello world"), (Ids{1, 15043, 3186}));
  // "<s>" is a control token: text unless parse_special; after it the text gets its space prefix again.
  EXPECT_EQ(tok->encode("<s>Hello", false, true), (Ids{1, 15043}));
  EXPECT_NE(tok->encode("<s>Hello", false, false).front(), 1);
  EXPECT_TRUE(tok->is_special(1));
  EXPECT_FALSE(tok->is_special(15043));
  EXPECT_EQ(tok->token_text(13), "<0x0A>");
  EXPECT_EQ(tok->token_bytes(13), "\n");
  EXPECT_EQ(tok->token_bytes(15043), " Hello");
  EXPECT_EQ(tok->token_id("\xe2\x96\x81Hello"), 15043);
}

TEST(TokenizerSpmGguf, LlamaSpmDecode) {
  const std::string path = kVocabDir + "/ggml-vocab-llama-spm.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << path << " not found";
  auto tok = load_gguf(path);
  EXPECT_EQ(tok->decode({1, 15043, 3186}), "Hello world");
  EXPECT_EQ(tok->decode({1, 15043, 3186}, false), "<s> Hello world");
  // 🦙 is four byte-fallback tokens.
  EXPECT_EQ(tok->decode({29871, 243, 162, 169, 156}), "\xf0\x9f\xa6\x99");
  // A lone lead byte cannot be decoded: U+FFFD.
  EXPECT_EQ(tok->decode({15043, 243}), "Hello\xef\xbf\xbd");
  for (const std::string text : {"Hello, y'all! How are you \xf0\x9f\x98\x81 ?", "  two spaces\n\tand a tab", "\xe6\x88\x91\xe6\x83\xb3"}) {
    EXPECT_EQ(tok->decode(tok->encode(text)), text);
  }
  EXPECT_THROW(tok->decode({32000}), mo::Error);
}

TEST(TokenizerSpmGguf, Phi3SpecialTokensSwallowFollowingWhitespace) {
  const std::string path = kVocabDir + "/ggml-vocab-phi-3.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << path << " not found";
  auto tok = load_gguf(path);
  // llama.cpp gives Phi-3's special tokens rstrip: the newline after <|user|> disappears, and the
  // text after a special token gets the SentencePiece space prefix.
  EXPECT_EQ(tok->encode("<|user|>\nHello<|end|>\n<|assistant|>", true, true), (Ids{1, 32010, 15043, 32007, 32001}));
  EXPECT_EQ(tok->special().eos, 32000);
  EXPECT_TRUE(tok->is_special(32007));
}

TEST(TokenizerSpmGguf, StoriesTokenizesEnglishWithoutByteFallback) {
  if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  auto tok = load_gguf(kStories);
  EXPECT_EQ(tok->vocab_size(), 512);
  const Ids ids = tok->encode("Once upon a time", true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 1);
  for (std::size_t i = 1; i < ids.size(); ++i) {
    EXPECT_GE(ids[i], 259) << "byte or special token " << ids[i] << " in plain English";
  }
  // Words start with ▁ pieces: the first real token carries the space prefix.
  EXPECT_EQ(tok->token_text(ids[1]).rfind("\xe2\x96\x81", 0), 0u);
  EXPECT_EQ(tok->decode(ids), "Once upon a time");
}

TEST(TokenizerSpmGguf, StoriesRoundTripsTinyStoriesSample) {
  const std::string path = kData + "/text/tinystories-sample.txt";
  if (!fs::exists(kStories) || !fs::exists(path)) GTEST_SKIP() << "stories260K.gguf or tinystories-sample.txt not found";
  auto tok = load_gguf(kStories);
  const std::string text = read_file(path);
  const Ids ids = tok->encode(text, true);
  EXPECT_LT(ids.size(), text.size() / 2) << "the vocabulary should cover most of the text with merged pieces";
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_EQ(tok->decode(tok->encode(text, false)), text);
}

// A GGUF vocabulary built in memory, to pin behaviours the real files do not exercise.
mo::gguf::File tiny_vocab(bool add_space_prefix) {
  using mo::gguf::Value;
  using mo::gguf::ValueType;
  auto str = [](std::string s) {
    Value v;
    v.type = ValueType::string;
    v.data = std::move(s);
    return v;
  };
  auto arr = [](ValueType elem, std::vector<Value> items) {
    Value v;
    v.type = ValueType::array;
    v.elem_type = elem;
    v.data = std::move(items);
    return v;
  };
  auto num = [](ValueType t, double x) {
    Value v;
    v.type = t;
    if (t == ValueType::f32)
      v.data = x;
    else
      v.data = static_cast<int64_t>(x);
    return v;
  };
  auto boolean = [](bool b) {
    Value v;
    v.type = ValueType::boolean;
    v.data = b;
    return v;
  };
  std::vector<std::string> texts = {"<unk>", "<s>", "</s>"};
  std::vector<int> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    texts.push_back(buf);
    types.push_back(6);
  }
  // 259 "▁", 260 "a", 261 "b", 262 "ab", 263 "▁a", 264 "▁ab"
  for (const char* t : {"\xe2\x96\x81", "a", "b", "ab",
                        "\xe2\x96\x81"
                        "a",
                        "\xe2\x96\x81"
                        "ab"}) {
    texts.push_back(t);
    types.push_back(1);
  }
  std::vector<Value> tv, sv, yv;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    tv.push_back(str(texts[i]));
    // "▁a" outscores "ab", so "▁ab" is reached as ▁a + b, not ▁ + ab.
    const double score = texts[i] ==
                                 "\xe2\x96\x81"
                                 "a"
                             ? -1.0
                             : (texts[i] == "ab" ? -2.0 : -3.0);
    sv.push_back(num(ValueType::f32, score));
    yv.push_back(num(ValueType::i32, types[i]));
  }
  mo::gguf::File f;
  f.path = "tiny.gguf";
  f.metadata.emplace_back("tokenizer.ggml.model", str("llama"));
  f.metadata.emplace_back("tokenizer.ggml.tokens", arr(ValueType::string, tv));
  f.metadata.emplace_back("tokenizer.ggml.scores", arr(ValueType::f32, sv));
  f.metadata.emplace_back("tokenizer.ggml.token_type", arr(ValueType::i32, yv));
  f.metadata.emplace_back("tokenizer.ggml.add_space_prefix", boolean(add_space_prefix));
  return f;
}

TEST(TokenizerSpmGguf, MergesByScoreAndFallsBackToBytes) {
  auto tok = mo::tok::load_tokenizer_gguf(tiny_vocab(true));
  EXPECT_EQ(tok->encode("ab", false), (Ids{264}));
  EXPECT_EQ(tok->encode("ab ab", false), (Ids{264, 264}));
  // "c" is not in the vocabulary: its byte token 0x63 + 3.
  EXPECT_EQ(tok->encode("abc", false), (Ids{264, 0x63 + 3}));
  EXPECT_EQ(tok->encode("", true), (Ids{1}));
  EXPECT_EQ(tok->decode({264, 0x63 + 3}), "abc");
}

TEST(TokenizerSpmGguf, AddSpacePrefixFalse) {
  auto tok = mo::tok::load_tokenizer_gguf(tiny_vocab(false));
  EXPECT_EQ(tok->encode("ab", false), (Ids{262}));
  EXPECT_EQ(tok->encode(" ab", false), (Ids{264}));
  EXPECT_EQ(tok->decode({264}), " ab");
}

TEST(TokenizerSpmGguf, UnsupportedModelNamesFileAndKey) {
  mo::gguf::File f = tiny_vocab(true);
  std::get<std::string>(f.metadata.front().second.data) = "bert";
  try {
    mo::tok::load_tokenizer_gguf(f);
    FAIL() << "expected an error";
  } catch (const mo::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tiny.gguf"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tokenizer.ggml.model 'bert'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'llama'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'gpt2'"), std::string::npos) << msg;
  }
}

TEST(TokenizerSpmGguf, MissingTokensNamesKey) {
  mo::gguf::File f = tiny_vocab(true);
  f.metadata.erase(f.metadata.begin() + 1);
  try {
    mo::tok::load_tokenizer_gguf(f);
    FAIL() << "expected an error";
  } catch (const mo::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiny.gguf: metadata key 'tokenizer.ggml.tokens' is missing"), std::string::npos) << e.what();
  }
}

TEST(TokenizerSpmJson, Llama2EncodeDecode) {
  if (!fs::exists(kLlama2Json)) GTEST_SKIP() << kLlama2Json << " not found";
  auto tok = mo::tok::load_tokenizer_json(kLlama2Json);
  ASSERT_EQ(tok->kind(), "spm");
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->special().bos, 1);
  EXPECT_EQ(tok->special().eos, 2);
  EXPECT_EQ(tok->special().unk, 0);
  EXPECT_TRUE(tok->special().add_bos);
  EXPECT_FALSE(tok->special().add_eos);
  // hf/llama2 holds the Mistral-7B vocabulary (ids checked against tokenizers 0.23).
  EXPECT_EQ(tok->encode("Hello world"), (Ids{1, 22557, 1526}));
  EXPECT_EQ(tok->encode("Hello world", false), (Ids{22557, 1526}));
  // The Prepend normalizer runs on every piece between added tokens: " Hello" keeps both spaces.
  EXPECT_EQ(tok->encode(" Hello", false), (Ids{28705, 22557}));
  EXPECT_EQ(tok->encode("</s>Hi", false, true), (Ids{2, 15359}));
  EXPECT_EQ(tok->decode({1, 22557, 1526}), "Hello world");
  EXPECT_EQ(tok->decode({1, 22557, 1526}, false), "<s> Hello world");
  EXPECT_EQ(tok->decode({22557, 243}), "Hello\xef\xbf\xbd");
  const std::string text = "Caf\xc3\xa9 \xf0\x9f\x9a\x80 \xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8";
  EXPECT_EQ(tok->decode(tok->encode(text)), text);
}

TEST(TokenizerSpmJson, TokenizerJsonPathOrDirectory) {
  if (!fs::exists(kLlama2Json)) GTEST_SKIP() << kLlama2Json << " not found";
  auto a = mo::tok::load_tokenizer_json(kLlama2Json);
  auto b = mo::tok::load_tokenizer_json(kLlama2Json + "/tokenizer.json");
  EXPECT_EQ(a->encode("The quick brown fox"), b->encode("The quick brown fox"));
}

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("mo_spm_test_" + std::to_string(::getpid()))) { fs::create_directories(path_); }
  ~TempDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return (path_ / name).string();
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(TokenizerLoader, UnsupportedModelTypeListsSupported) {
  TempDir dir;
  const std::string path = dir.write("tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0}}})");
  try {
    mo::tok::load_tokenizer_json(dir.str());
    FAIL() << "expected an error";
  } catch (const mo::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.type 'WordPiece' is not supported"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ByteLevel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("byte_fallback"), std::string::npos) << msg;
  }
}

TEST(TokenizerLoader, DirectoryWithoutTokenizerJson) {
  TempDir dir;
  EXPECT_THROW(mo::tok::load_tokenizer_json(dir.str()), mo::UsageError);
}

TEST(TokenizerSpmJson, MetaspacePreTokenizerPrependsOnlyAtStart) {
  // Newer Llama/Mistral files: no normalizer, Metaspace(prepend_scheme "first", split false).
  TempDir dir;
  const std::string json = R"({
    "added_tokens": [{"id": 1, "content": "<s>", "special": true, "lstrip": false, "rstrip": false, "normalized": false, "single_word": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false},
    "post_processor": null,
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>",
      "vocab": {"<unk>": 0, "<s>": 1, "\u2581": 2, "a": 3, "b": 4, "\u2581a": 5, "ab": 6, "\u2581ab": 7},
      "merges": ["\u2581 a", "a b", "\u2581a b"]}
  })";
  dir.write("tokenizer.json", json);
  auto tok = mo::tok::load_tokenizer_json(dir.str());
  EXPECT_EQ(tok->kind(), "spm");
  EXPECT_EQ(tok->encode("ab ab", false), (Ids{7, 7}));
  // A leading space is not doubled (unlike the Prepend normalizer) ...
  EXPECT_EQ(tok->encode(" ab", false), (Ids{7}));
  // ... and the text after an added token gets no ▁.
  EXPECT_EQ(tok->encode("<s>ab", false, true), (Ids{1, 6}));
  // "c" has no byte token here: fused <unk>.
  EXPECT_EQ(tok->encode("cc", false), (Ids{2, 0}));
  EXPECT_EQ(tok->decode({7, 7}), "ab ab");
}

// Found by fuzz_tokenizer_json: a float id (1e99) was cast to int unchecked (UBSan: float-cast-overflow), and a
// huge id sized the token table. Each is now an error naming the file and the field.
TEST(TokenizerSpmJson, IdsThatAreNotSmallIntegersAreErrorsNamingTheField) {
  const std::string head = R"({"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false},
    "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]}, )";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("model": {"type": "BPE", "byte_fallback": true, "vocab": {"<unk>": 0, "a": 1e99}, "merges": []}})", "model.vocab.a"},
      {R"("model": {"type": "BPE", "byte_fallback": true, "vocab": {"<unk>": 0, "a": 2147483647}, "merges": []}})", "model.vocab.a"},
      {R"("model": {"type": "BPE", "byte_fallback": true, "vocab": {"<unk>": 0, "a": 1}, "merges": []},
          "added_tokens": [{"id": -3, "content": "<s>"}]})",
       "added_tokens[0].id"},
  };
  for (const auto& [body, field] : cases) {
    TempDir dir;
    const std::string path = dir.write("tokenizer.json", head + body);
    try {
      mo::tok::load_tokenizer_json(dir.str());
      ADD_FAILURE() << "expected an error for " << body;
    } catch (const mo::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find(field), std::string::npos) << msg;
    }
  }
}

}  // namespace
