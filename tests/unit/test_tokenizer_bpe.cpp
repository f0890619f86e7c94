#include <gtest/gtest.h>

#include "vocab_vectors.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../src/tokenizer/factories.h"
#include "../../src/tokenizer/unicode_nfc.h"
#include "mo/core/error.h"
#include "mo/io/gguf.h"
#include "mo/tokenizer/tokenizer.h"
#include "mo/tokenizer/utf8.h"

#ifndef MO_SHARED_DATA
#error "MO_SHARED_DATA must be defined by the build as the path of the shared data folder"
#endif

namespace {

namespace fs = std::filesystem;
using mo::tok::Tokenizer;
using Ids = std::vector<std::int32_t>;

const std::string kVocabDir = std::string(MO_SHARED_DATA) + "/tokenizers/llama-cpp-vocab/";
const std::string kHfDir = std::string(MO_SHARED_DATA) + "/tokenizers/hf/";

// Loading llama3 / qwen3 takes seconds: each tokenizer is loaded once for the whole test binary.
const Tokenizer& shared(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[path];
  if (!slot) {
    slot = path.ends_with(".gguf") ? mo::tok::load_tokenizer_gguf(mo::gguf::read_metadata(path)) : mo::tok::load_tokenizer_json(path);
  }
  return *slot;
}

#define REQUIRE_DATA(path) \
  if (!fs::exists(path)) GTEST_SKIP() << path << " is missing (shared data not present)"

std::string show(const Ids& ids) {
  std::string s;
  for (const auto id : ids) s += std::to_string(id) + " ";
  return s;
}

// Every vector of `vocab_name`, encoded as test-tokenizer-0 does: add_special and parse_special off.
void expect_vectors(const std::string& tokenizer_path, const std::string& vocab_name) {
  const Tokenizer& tok = shared(tokenizer_path);
  const auto vectors = mo::test::read_vocab_vectors(kVocabDir + "ggml-vocab-" + vocab_name + ".gguf");
  ASSERT_GT(vectors.size(), 40u);
  int passed = 0;
  for (const auto& v : vectors) {
    const Ids got = tok.encode(v.input, false, false);
    EXPECT_EQ(got, v.expected) << "input '" << v.input << "'\n  got      " << show(got) << "\n  expected " << show(v.expected);
    passed += got == v.expected;
    // The ids decode back to the input (none of the vectors contains special tokens).
    EXPECT_EQ(tok.decode(got, true), v.input);
  }
  testing::Test::RecordProperty("vectors_passed", std::to_string(passed) + "/" + std::to_string(vectors.size()));
}

class GgufVocab : public testing::TestWithParam<std::string> {};

TEST_P(GgufVocab, EveryLlamaCppVectorPasses) {
  const std::string path = kVocabDir + "ggml-vocab-" + GetParam() + ".gguf";
  REQUIRE_DATA(path);
  expect_vectors(path, GetParam());
  EXPECT_EQ(shared(path).kind(), "bpe");
  EXPECT_EQ(shared(path).pre(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(TokenizerBpe, GgufVocab,
                         testing::Values("gpt-2", "mpt", "starcoder", "refact", "falcon", "deepseek-llm", "deepseek-coder"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(TokenizerBpe, LlamaBpeVectorsPassWithLlama3TokenizerJson) {
  REQUIRE_DATA(kHfDir + "llama3/tokenizer.json");
  expect_vectors(kHfDir + "llama3", "llama-bpe");
  EXPECT_EQ(shared(kHfDir + "llama3").pre(), "llama3");
}

TEST(TokenizerBpe, Qwen2VectorsPassWithQwen3TokenizerJson) {
  REQUIRE_DATA(kHfDir + "qwen3/tokenizer.json");
  expect_vectors(kHfDir + "qwen3", "qwen2");
  EXPECT_EQ(shared(kHfDir + "qwen3").pre(), "qwen2");
}

TEST(TokenizerBpe, GgufWithoutPreUsesLlamaCppDefaultRegexes) {
  // ggml-vocab-gpt-neox.gguf has MPT's vocabulary but no tokenizer.ggml.pre; llama.cpp then uses its
  // "default" regexes, which isolate punctuation, so " (" splits where MPT's GPT-2 regex keeps it whole.
  const std::string neox = kVocabDir + "ggml-vocab-gpt-neox.gguf", mpt = kVocabDir + "ggml-vocab-mpt.gguf";
  REQUIRE_DATA(neox);
  const Tokenizer& tok = shared(neox);
  EXPECT_EQ(tok.pre(), "default");
  EXPECT_FALSE(tok.special().add_bos);
  EXPECT_EQ(tok.encode("Hello world", true, false), (Ids{12092, 1533}));
  EXPECT_EQ(tok.encode(" (", false, false), (Ids{209, 9}));
  EXPECT_EQ(shared(mpt).encode(" (", false, false), (Ids{313}));
}

TEST(TokenizerBpe, Llama3TokensAndBytes) {
  REQUIRE_DATA(kHfDir + "llama3/tokenizer.json");
  const Tokenizer& tok = shared(kHfDir + "llama3");
  EXPECT_EQ(tok.encode("Hello world", false, false), (Ids{9906, 1917}));
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_EQ(tok.token_text(1917), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(tok.token_bytes(1917), " world");
  EXPECT_EQ(tok.token_id("\xC4\xA0world"), 1917);
  EXPECT_EQ(tok.token_id("no such token"), std::nullopt);
  EXPECT_EQ(tok.token_bytes(198), "\n");  // "Ċ"
  EXPECT_EQ(tok.special().bos, 128000);
  EXPECT_EQ(tok.special().eos, 128001);
  EXPECT_TRUE(tok.is_special(128000));
  EXPECT_FALSE(tok.is_special(9906));
  // This tokenizer.json's post_processor is ByteLevel (no template) and tokenizer_config.json has no
  // add_bos_token, so Hugging Face adds nothing; the chat template writes <|begin_of_text|>.
  EXPECT_FALSE(tok.special().add_bos);
  EXPECT_EQ(tok.encode("Hello world", true, false), (Ids{9906, 1917}));
}

TEST(TokenizerBpe, SpecialTokensAreTextUnlessParsed) {
  REQUIRE_DATA(kHfDir + "qwen3/tokenizer.json");
  const Tokenizer& tok = shared(kHfDir + "qwen3");
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const Ids parsed = tok.encode(text, true, true);
  EXPECT_EQ(parsed, (Ids{151644, 872, 198, 6023, 151645}));
  const Ids plain = tok.encode(text, true, false);
  EXPECT_EQ(plain.front(), 27);  // "<"
  EXPECT_EQ(tok.decode(plain, true), text);
  // skip_special leaves out <|im_start|> / <|im_end|>; keeping them gives the text back.
  EXPECT_EQ(tok.decode(parsed, true), "user\nhi");
  EXPECT_EQ(tok.decode(parsed, false), text);
  // Non-special added tokens (<think>) are always matched, as in Hugging Face.
  EXPECT_EQ(tok.encode("<think>", false, false), (Ids{151667}));
  EXPECT_FALSE(tok.is_special(151667));
}

TEST(TokenizerBpe, QwenNormalizesToNfcBeforeSplitting) {
  REQUIRE_DATA(kHfDir + "qwen3/tokenizer.json");
  const Tokenizer& tok = shared(kHfDir + "qwen3");
  // "e" + COMBINING ACUTE ACCENT is "é" after NFC; Llama 3 has no normalizer and keeps the two apart.
  EXPECT_EQ(tok.encode("caf\x65\xCC\x81", false, false), tok.encode("caf\xC3\xA9", false, false));
  const Tokenizer& llama3 = shared(kHfDir + "llama3");
  EXPECT_NE(llama3.encode("caf\x65\xCC\x81", false, false), llama3.encode("caf\xC3\xA9", false, false));
}

TEST(TokenizerBpe, GgufAddsBosWhenTheFileSaysSo) {
  const std::string path = kVocabDir + "ggml-vocab-deepseek-coder.gguf";
  REQUIRE_DATA(path);
  const Tokenizer& tok = shared(path);
  EXPECT_TRUE(tok.special().add_bos);
  EXPECT_EQ(tok.special().bos, 32013);
  const Ids ids = tok.encode("Hello", true, false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], 32013);
  EXPECT_EQ(tok.decode(ids, true), "Hello");
  EXPECT_EQ(tok.decode(ids, false),
            "<\xEF\xBD\x9C"
            "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>Hello");
}

TEST(TokenizerBpe, DecodeReplacesIncompleteCharacters) {
  const std::string path = kVocabDir + "ggml-vocab-gpt-2.gguf";
  REQUIRE_DATA(path);
  const Tokenizer& tok = shared(path);
  const Ids ids = tok.encode("\xF0\x9F\xA6\x99", false, false);  // 🦙, split over byte tokens
  ASSERT_GT(ids.size(), 1u);
  EXPECT_EQ(tok.decode(ids, true), "\xF0\x9F\xA6\x99");
  std::string bytes;
  for (const auto id : ids) bytes += tok.token_bytes(id);
  EXPECT_EQ(bytes, "\xF0\x9F\xA6\x99");
  EXPECT_EQ(tok.decode({ids.front()}, true), "\xEF\xBF\xBD");
}

TEST(TokenizerBpe, InvalidUtf8InputRoundTrips) {
  const std::string path = kVocabDir + "ggml-vocab-gpt-2.gguf";
  REQUIRE_DATA(path);
  const Tokenizer& tok = shared(path);
  const std::string text = "ok \xFF\xC3 bytes";
  std::string bytes;
  for (const auto id : tok.encode(text, false, false)) bytes += tok.token_bytes(id);
  EXPECT_EQ(bytes, text);
}

TEST(TokenizerBpe, OutOfRangeIdNamesTheFile) {
  const std::string path = kVocabDir + "ggml-vocab-gpt-2.gguf";
  REQUIRE_DATA(path);
  try {
    shared(path).decode({50257}, true);
    FAIL() << "expected mo::Error";
  } catch (const mo::Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": token id 50257 is out of range (vocab size 50257)");
  }
}

TEST(TokenizerBpe, EncodesTheSameOnManyThreads) {
  REQUIRE_DATA(kHfDir + "llama3/tokenizer.json");
  const Tokenizer& tok = shared(kHfDir + "llama3");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "word" + std::to_string(i * 7919) + " zebra-like fox's quirk\n";
  const Ids expected = tok.encode(text, false, false);
  std::vector<Ids> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { r = tok.encode(text, false, false); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, expected);
}

// A tiny byte-level tokenizer.json: the 256 byte characters, a few merges and added tokens.
nlohmann::json tiny_tokenizer(const nlohmann::json& added, const nlohmann::json& pre_tokenizer) {
  // Byte b gets id b, so a printable ASCII character's id is its code.
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    vocab[mo::tok::utf8_encode(printable ? static_cast<char32_t>(b) : next++)] = id++;
  }
  vocab["ab"] = id++;   // 256
  vocab["abc"] = id++;  // 257
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", nlohmann::json::array({"ab", "c"})}}}},
          {"added_tokens", added},
          {"pre_tokenizer", pre_tokenizer},
          {"decoder", {{"type", "ByteLevel"}}}};
}

nlohmann::json added_token(int id, const std::string& content, bool special, bool lstrip, bool rstrip, bool single_word) {
  return {{"id", id},         {"content", content},         {"special", special}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"single_word", single_word}, {"normalized", false}};
}

const nlohmann::json kByteLevel = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};

TEST(TokenizerBpe, AddedTokenStripAndSingleWordFlags) {
  const auto tj = tiny_tokenizer({added_token(300, "<l>", true, true, false, false), added_token(301, "<r>", true, false, true, false),
                                  added_token(302, "<w>", false, false, false, true)},
                                 kByteLevel);
  const auto tok = mo::tok::make_bpe_from_json(tj, nullptr, "tiny.json");
  const Ids space = tok->encode(" ", false, false);
  ASSERT_EQ(space.size(), 1u);
  // lstrip swallows the spaces before <l>; rstrip the ones after <r>.
  EXPECT_EQ(tok->encode("abc  <l>", false, true), (Ids{257, 300}));
  EXPECT_EQ(tok->encode("<r>  abc", false, true), (Ids{301, 257}));
  // single_word: only matched between non-word characters.
  EXPECT_EQ(tok->encode("<w> ab", false, false), (Ids{302, space[0], 256}));
  EXPECT_NE(tok->encode("ab<w>", false, false).back(), 302);
  EXPECT_EQ(tok->encode("abc", false, false), (Ids{257}));
}

TEST(TokenizerBpe, SplitBehaviorsFollowHuggingFace) {
  const auto with_split = [](const std::string& behavior, bool invert) {
    const nlohmann::json pre = {{"type", "Sequence"},
                                {"pretokenizers",
                                 {{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}},
                                  {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
    return mo::tok::make_bpe_from_json(tiny_tokenizer(nlohmann::json::array(), pre), nullptr, "tiny.json");
  };
  EXPECT_EQ(with_split("Removed", false)->encode("ab-c", false, false), (Ids{256, 'c'}));
  EXPECT_EQ(with_split("Isolated", false)->encode("abc-abc", false, false), (Ids{257, '-', 257}));
  // "a-" stays one word, so "a" and "-" do not meet "b" ("ab" would merge otherwise).
  EXPECT_EQ(with_split("MergedWithPrevious", false)->encode("a-b", false, false), (Ids{'a', '-', 'b'}));
  EXPECT_EQ(with_split("MergedWithNext", false)->encode("a-b", false, false), (Ids{'a', '-', 'b'}));
  // Removed + invert keeps only the matches.
  EXPECT_EQ(with_split("Removed", true)->encode("ab-c", false, false), (Ids{'-'}));
}

TEST(TokenizerBpe, UnsupportedPiecesAreNamed) {
  nlohmann::json tj = tiny_tokenizer(nlohmann::json::array(), {{"type", "Metaspace"}});
  EXPECT_THROW(
      {
        try {
          mo::tok::make_bpe_from_json(tj, nullptr, "t.json");
        } catch (const mo::Error& e) {
          EXPECT_EQ(std::string(e.what()), "t.json: pre_tokenizer type 'Metaspace' is not supported for byte-level BPE");
          throw;
        }
      },
      mo::Error);
  tj = tiny_tokenizer(nlohmann::json::array(), kByteLevel);
  tj["model"].erase("merges");
  try {
    mo::tok::make_bpe_from_json(tj, nullptr, "t.json");
    FAIL() << "expected mo::Error";
  } catch (const mo::Error& e) {
    EXPECT_EQ(std::string(e.what()), "t.json: key 'model.merges' is missing");
  }
  tj = tiny_tokenizer(nlohmann::json::array(), {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}});
  EXPECT_THROW(mo::tok::make_bpe_from_json(tj, nullptr, "t.json"), mo::Error);
}

TEST(TokenizerBpe, ConfigAddBosTokenOverridesThePostProcessor) {
  auto tj = tiny_tokenizer(nlohmann::json::array({added_token(300, "<s>", true, false, false, false)}), kByteLevel);
  const nlohmann::json config = {{"bos_token", "<s>"}, {"add_bos_token", true}};
  const auto tok = mo::tok::make_bpe_from_json(tj, config, "tiny.json");
  EXPECT_TRUE(tok->special().add_bos);
  EXPECT_EQ(tok->encode("abc", true, false), (Ids{300, 257}));
  EXPECT_EQ(tok->encode("abc", false, false), (Ids{257}));
  // TemplateProcessing adds BOS by itself.
  tj["post_processor"] = {{"type", "TemplateProcessing"},
                          {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                          {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {300}}, {"tokens", {"<s>"}}}}}}};
  const auto templ = mo::tok::make_bpe_from_json(tj, nullptr, "tiny.json");
  EXPECT_EQ(templ->special().bos, 300);
  EXPECT_EQ(templ->encode("abc", true, false), (Ids{300, 257}));
}

TEST(TokenizerBpeUnicode, NfcComposesAndOrders) {
  using mo::tok::nfc;
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                        // e + U+0301 -> é
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");     // Hangul L + V -> 가
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                     // ANGSTROM SIGN -> Å
  EXPECT_EQ(nfc("a\xCC\x9B\xCC\x80"), nfc("a\xCC\x80\xCC\x9B"));  // combining marks reordered by class
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  // Only the stretches around combining characters change; the text between them is kept as is.
  EXPECT_EQ(nfc("x caf\x65\xCC\x81 \xC3\xA9t\xC3\xA9 \xE1\x84\x80\xE1\x85\xA1!"), "x caf\xC3\xA9 \xC3\xA9t\xC3\xA9 \xEA\xB0\x80!");
  EXPECT_EQ(nfc("bad \xFF byte \xCC"), "bad \xFF byte \xCC");
}

TEST(TokenizerBpeUnicode, Utf8Helpers) {
  using namespace mo::tok;
  EXPECT_EQ(utf8_sanitize("a\xF0\x9F\xA6"
                          "b"),
            "a\xEF\xBF\xBD"
            "b");                                                                    // one U+FFFD per maximal subpart
  EXPECT_EQ(utf8_sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate: 3 subparts
  EXPECT_EQ(utf8_incomplete_tail("ok\xF0\x9F\xA6"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("ok\xF0\x9F\xA6\x99"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("ok\xFF"), 0u);
  EXPECT_TRUE(utf8_is_valid("\xE2\x82\xAC"));
  EXPECT_FALSE(utf8_is_valid("\xC0\xAF"));
}

}  // namespace
