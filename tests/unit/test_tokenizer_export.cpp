// GGUF <-> Hugging Face tokenizer conversion: layout of the files written, the pre-tokenizer names
// found, and GGUF -> HF -> GGUF round trips of real vocabularies with every difference accounted for.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "mo/core/error.h"
#include "mo/io/gguf.h"
#include "mo/io/json_file.h"
#include "mo/tokenizer/tokenizer_export.h"

#ifndef MO_SHARED_DATA
#error "MO_SHARED_DATA must be defined by the build as the path of the shared data folder"
#endif

namespace {

using mo::gguf::Value;
using nlohmann::json;
using KeyValues = std::vector<std::pair<std::string, Value>>;

const std::string kData = MO_SHARED_DATA;
const std::string kVocab = kData + "/tokenizers/llama-cpp-vocab/ggml-vocab-";
const std::string kHf = kData + "/tokenizers/hf/";
const std::string kSp = "\xe2\x96\x81";  // ▁

mo::gguf::File vocab_file(KeyValues kv) {
  mo::gguf::File f;
  f.path = "test.gguf";
  f.metadata = std::move(kv);
  return f;
}

std::map<std::string, Value> as_map(const KeyValues& kv) { return {kv.begin(), kv.end()}; }

std::vector<std::string> strings(const Value& v) {
  std::vector<std::string> out;
  for (const auto& e : v.as_array()) out.push_back(e.as_string());
  return out;
}

std::vector<double> numbers(const Value& v) {
  std::vector<double> out;
  for (const auto& e : v.as_array()) out.push_back(e.as_number());
  return out;
}

// A five-piece SentencePiece vocabulary: "abc" can be made as a+bc or ab+c.
KeyValues tiny_spm() {
  return {{"tokenizer.ggml.model", Value::str("llama")},
          {"tokenizer.ggml.tokens", Value::array_of_strings({"<unk>", "<s>", "</s>", "a", "b", "c", "ab", "bc", "abc"})},
          {"tokenizer.ggml.scores", Value::array_of_f32(std::vector<float>{0, 0, 0, -5, -6, -7, -1, -2, -3})},
          {"tokenizer.ggml.token_type", Value::array_of_i32(std::vector<int32_t>{2, 3, 3, 1, 1, 1, 1, 1, 1})},
          {"tokenizer.ggml.bos_token_id", Value::u32(1)},
          {"tokenizer.ggml.eos_token_id", Value::u32(2)},
          {"tokenizer.ggml.unknown_token_id", Value::u32(0)}};
}

KeyValues tiny_gpt2(const std::string& pre) {
  return {{"tokenizer.ggml.model", Value::str("gpt2")},
          {"tokenizer.ggml.pre", Value::str(pre)},
          {"tokenizer.ggml.tokens", Value::array_of_strings({"a", "b", "ab", "<|endoftext|>"})},
          {"tokenizer.ggml.token_type", Value::array_of_i32(std::vector<int32_t>{1, 1, 1, 3})},
          {"tokenizer.ggml.merges", Value::array_of_strings({"a b"})},
          {"tokenizer.ggml.bos_token_id", Value::u32(3)},
          {"tokenizer.ggml.eos_token_id", Value::u32(3)}};
}

// A byte-level tokenizer.json with the given pre-tokenizer.
json byte_level_json(json pre_tokenizer, bool ignore_merges = false) {
  return {{"added_tokens", json::array({{{"id", 3}, {"content", "<|endoftext|>"}, {"special", true}}})},
          {"pre_tokenizer", std::move(pre_tokenizer)},
          {"model",
           {{"type", "BPE"},
            {"byte_fallback", false},
            {"ignore_merges", ignore_merges},
            {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}},
            {"merges", json::array({"a b"})}}}};
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

json split(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

std::string pre_of(const json& tokenizer_json, const json& config = nullptr) {
  return as_map(mo::tok::gguf_tokenizer_kv_from_hf(tokenizer_json, config, 0)).at("tokenizer.ggml.pre").as_string();
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const mo::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// --- GGUF -> HF --------------------------------------------------------------------------------

TEST(TokenizerExport, SpmMergesAreOrderedByScoreThenLongerLeftPart) {
  const auto hf = mo::tok::hf_tokenizer_from_gguf(vocab_file(tiny_spm()));
  // "abc" (score -3) comes after "ab" (-1) and "bc" (-2); its split "ab"+"c" before "a"+"bc".
  const json want = json::array({json::array({"a", "b"}), json::array({"b", "c"}), json::array({"ab", "c"}), json::array({"a", "bc"})});
  EXPECT_EQ(hf.tokenizer_json["model"]["merges"], want);
  EXPECT_EQ(hf.tokenizer_json["model"]["vocab"]["abc"], 8);
  EXPECT_EQ(hf.tokenizer_json["model"]["unk_token"], "<unk>");
  EXPECT_TRUE(hf.tokenizer_json["model"]["byte_fallback"].get<bool>());
}

// transformers' generate_merges as it is written: every split of every token, both halves looked up.
json reference_spm_merges(const std::vector<std::string>& tokens, const std::vector<float>& scores) {
  std::map<std::string, std::size_t> id;
  for (std::size_t i = tokens.size(); i-- > 0;) id[tokens[i]] = i;
  struct M {
    std::size_t l, r;
    float score;
    std::size_t lc, rc;
  };
  std::vector<M> all;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    std::vector<std::size_t> starts;  // character starts; bytes 10xxxxxx continue a character
    for (std::size_t i = 0; i < tokens[t].size(); ++i)
      if ((static_cast<unsigned char>(tokens[t][i]) & 0xC0) != 0x80) starts.push_back(i);
    std::vector<M> local;
    for (std::size_t k = 1; k < starts.size(); ++k) {
      const auto l = id.find(tokens[t].substr(0, starts[k])), r = id.find(tokens[t].substr(starts[k]));
      if (l != id.end() && r != id.end()) local.push_back({l->second, r->second, scores[t], k, starts.size() - k});
    }
    std::sort(local.begin(), local.end(), [](const M& a, const M& b) { return std::tie(a.l, a.r) < std::tie(b.l, b.r); });
    all.insert(all.end(), local.begin(), local.end());
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const M& a, const M& b) { return std::tie(b.score, b.lc, b.rc) < std::tie(a.score, a.lc, a.rc); });
  json out = json::array();
  for (const M& m : all) out.push_back(json::array({tokens[m.l], tokens[m.r]}));
  return out;
}

KeyValues spm_vocab(const std::vector<std::string>& tokens, const std::vector<float>& scores) {
  std::vector<std::int32_t> types(tokens.size(), 1);
  types[0] = 2;
  return {{"tokenizer.ggml.model", Value::str("llama")},
          {"tokenizer.ggml.tokens", Value::array_of_strings(tokens)},
          {"tokenizer.ggml.scores", Value::array_of_f32(scores)},
          {"tokenizer.ggml.token_type", Value::array_of_i32(types)},
          {"tokenizer.ggml.unknown_token_id", Value::u32(0)}};
}

TEST(TokenizerExport, SpmMergesAreEverySplitOfEveryTokenAsTransformersListsThem) {
  // Random vocabularies of short pieces over ASCII, a two-byte character and stray continuation bytes,
  // with few distinct scores so the order of ties is tested too.
  const std::vector<std::string> pieces = {"a", "b", "ab", "\xc3\xa9", kSp, "\x80", "ba"};
  std::uint64_t seed = 7;
  auto next = [&](std::uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % n;
  };
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> tokens = {"<unk>"};
    std::vector<float> scores = {0};
    std::set<std::string> seen = {"<unk>"};
    while (tokens.size() < 120) {
      std::string t;
      for (std::uint64_t n = 1 + next(4); n > 0; --n) t += pieces[next(pieces.size())];
      if (!seen.insert(t).second) continue;
      tokens.push_back(t);
      scores.push_back(-static_cast<float>(next(6)));
    }
    const auto hf = mo::tok::hf_tokenizer_from_gguf(vocab_file(spm_vocab(tokens, scores)));
    const json want = reference_spm_merges(tokens, scores);
    ASSERT_GT(want.size(), 50u);
    ASSERT_EQ(hf.tokenizer_json["model"]["merges"], want) << "round " << round;
  }
}

TEST(TokenizerExport, SpmMergesOfAOneMegabyteTokenTakeLinearTime) {
  // Hashing both halves of every split of a 1 MB token reads 10^12 bytes: minutes in convert and quantize.
  const std::string big(1'000'000, 'a'), almost(999'999, 'a');
  std::vector<std::string> tokens = {"<unk>", "a", "aa", big, almost};
  std::vector<float> scores = {0, -1, -2, -3, -4};
  // A real vocabulary's size: small hash maps are searched by comparing lengths, which hides the cost.
  for (int i = 0; i < 500; ++i) {
    tokens.push_back("b" + std::to_string(i));
    scores.push_back(-5.0f - static_cast<float>(i));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto hf = mo::tok::hf_tokenizer_from_gguf(vocab_file(spm_vocab(tokens, scores)));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // "aa" (-2) splits once; the big token (-3) twice, the longer left part first.
  EXPECT_EQ(hf.tokenizer_json["model"]["merges"],
            json::array({json::array({"a", "a"}), json::array({almost, "a"}), json::array({"a", almost})}));
  EXPECT_LT(seconds, 5.0);
}

TEST(TokenizerExport, SpmLayoutMatchesLlamaConverterLegacy) {
  const auto hf = mo::tok::hf_tokenizer_from_gguf(vocab_file(tiny_spm()));
  const json& tj = hf.tokenizer_json;
  EXPECT_EQ(tj["normalizer"]["normalizers"][0], (json{{"type", "Prepend"}, {"prepend", kSp}}));
  EXPECT_EQ(tj["normalizer"]["normalizers"][1]["pattern"]["String"], " ");
  EXPECT_TRUE(tj["pre_tokenizer"].is_null());
  ASSERT_EQ(tj["decoder"]["decoders"].size(), 4u);
  EXPECT_EQ(tj["decoder"]["decoders"][3]["type"], "Strip");
  EXPECT_EQ(tj["post_processor"]["single"][0]["SpecialToken"]["id"], "<s>");
  EXPECT_EQ(tj["post_processor"]["special_tokens"]["<s>"]["ids"], json::array({1}));
  ASSERT_EQ(tj["added_tokens"].size(), 3u);
  EXPECT_TRUE(tj["added_tokens"][1]["special"].get<bool>());
  EXPECT_EQ(hf.tokenizer_config["tokenizer_class"], "LlamaTokenizerFast");
  EXPECT_EQ(hf.tokenizer_config["bos_token"], "<s>");
  EXPECT_TRUE(hf.tokenizer_config["add_bos_token"].get<bool>());
  EXPECT_EQ(hf.special_tokens_map["unk_token"]["content"], "<unk>");
}

TEST(TokenizerExport, SpmWithoutSpacePrefixHasNoPrependNorStrip) {
  auto kv = tiny_spm();
  kv.emplace_back("tokenizer.ggml.add_space_prefix", Value::boolean(false));
  kv.emplace_back("tokenizer.ggml.add_bos_token", Value::boolean(false));
  const auto hf = mo::tok::hf_tokenizer_from_gguf(vocab_file(kv));
  EXPECT_EQ(hf.tokenizer_json["normalizer"]["normalizers"].size(), 1u);
  EXPECT_EQ(hf.tokenizer_json["decoder"]["decoders"].size(), 3u);
  EXPECT_TRUE(hf.tokenizer_json["post_processor"].is_null());
  // ... and back: llama.cpp needs to be told there is no space prefix.
  const auto back = as_map(mo::tok::gguf_tokenizer_kv_from_hf(hf.tokenizer_json, hf.tokenizer_config, 0));
  EXPECT_FALSE(back.at("tokenizer.ggml.add_space_prefix").as_bool());
  EXPECT_FALSE(back.at("tokenizer.ggml.add_bos_token").as_bool());
}

TEST(TokenizerExport, Gpt2PreTypeBecomesSplitRegexesAndIgnoreMerges) {
  const auto qwen = mo::tok::hf_tokenizer_from_gguf(vocab_file(tiny_gpt2("qwen2")));
  const json& steps = qwen.tokenizer_json["pre_tokenizer"]["pretokenizers"];
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0]["pattern"]["Regex"],
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  EXPECT_EQ(steps[1], byte_level(false));
  EXPECT_FALSE(qwen.tokenizer_json["model"]["ignore_merges"].get<bool>());
  EXPECT_EQ(qwen.tokenizer_json["model"]["merges"], json::array({json::array({"a", "b"})}));
  EXPECT_EQ(qwen.tokenizer_json["post_processor"]["type"], "ByteLevel");  // no BOS for qwen2
  EXPECT_FALSE(qwen.tokenizer_config["clean_up_tokenization_spaces"].get<bool>());
  EXPECT_EQ(qwen.tokenizer_config["tokenizer_class"], "PreTrainedTokenizerFast");

  const auto llama3 = mo::tok::hf_tokenizer_from_gguf(vocab_file(tiny_gpt2("llama-bpe")));
  EXPECT_TRUE(llama3.tokenizer_json["model"]["ignore_merges"].get<bool>());
  // llama.cpp adds BOS for llama3-type vocabularies without tokenizer.ggml.add_bos_token.
  EXPECT_EQ(llama3.tokenizer_json["post_processor"]["single"][0]["SpecialToken"]["id"], "<|endoftext|>");
}

TEST(TokenizerExport, DeepseekRegexesAreWrittenAsUtf8) {
  auto kv = tiny_gpt2("deepseek-coder");
  const auto hf = mo::tok::hf_tokenizer_from_gguf(vocab_file(kv));
  const json& steps = hf.tokenizer_json["pre_tokenizer"]["pretokenizers"];
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(steps[0]["pattern"]["Regex"], "[\r\n]");
  EXPECT_EQ(steps[3]["pattern"]["Regex"], "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+");
}

TEST(TokenizerExport, GgufErrorsNameTheProblem) {
  auto bert = tiny_gpt2("gpt-2");
  bert[0].second = Value::str("bert");
  EXPECT_NE(error_of([&] { mo::tok::hf_tokenizer_from_gguf(vocab_file(bert)); }).find("tokenizer.ggml.model 'bert'"), std::string::npos);
  EXPECT_NE(error_of([&] { mo::tok::hf_tokenizer_from_gguf(vocab_file(tiny_gpt2("kimi-k2"))); }).find("'kimi-k2'"), std::string::npos);
  auto short_types = tiny_spm();
  short_types[3].second = Value::array_of_i32(std::vector<int32_t>{2, 3});
  EXPECT_NE(error_of([&] { mo::tok::hf_tokenizer_from_gguf(vocab_file(short_types)); }).find("has 2 entries for 9 tokens"),
            std::string::npos);
}

TEST(TokenizerExport, ChatTemplatesAndContextLengthGoToTokenizerConfig) {
  auto kv = tiny_gpt2("gpt-2");
  kv.emplace_back("general.architecture", Value::str("gpt2"));
  kv.emplace_back("gpt2.context_length", Value::u32(1024));
  kv.emplace_back("tokenizer.chat_template", Value::str("{{ messages }}"));
  kv.emplace_back("tokenizer.chat_template.tool_use", Value::str("{{ tools }}"));
  const auto hf = mo::tok::hf_tokenizer_from_gguf(vocab_file(kv));
  EXPECT_EQ(hf.tokenizer_config["model_max_length"], 1024);
  const json want =
      json::array({{{"name", "default"}, {"template", "{{ messages }}"}}, {{"name", "tool_use"}, {"template", "{{ tools }}"}}});
  EXPECT_EQ(hf.tokenizer_config["chat_template"], want);
  const auto back = mo::tok::gguf_tokenizer_kv_from_hf(hf.tokenizer_json, hf.tokenizer_config, 0);
  const auto m = as_map(back);
  EXPECT_EQ(m.at("tokenizer.chat_template").as_string(), "{{ messages }}");
  EXPECT_EQ(m.at("tokenizer.chat_template.tool_use").as_string(), "{{ tools }}");
  EXPECT_EQ(strings(m.at("tokenizer.chat_templates")), std::vector<std::string>{"tool_use"});
}

TEST(TokenizerExport, PaddingTokensLeaveTheHfVocabularyAndComeBack) {
  auto kv = tiny_gpt2("gpt-2");
  kv[2].second = Value::array_of_strings({"a", "b", "ab", "<|endoftext|>", "[PAD4]"});
  kv[3].second = Value::array_of_i32(std::vector<int32_t>{1, 1, 1, 3, 5});
  const auto hf = mo::tok::hf_tokenizer_from_gguf(vocab_file(kv));
  EXPECT_FALSE(hf.tokenizer_json["model"]["vocab"].contains("[PAD4]"));
  const auto back = as_map(mo::tok::gguf_tokenizer_kv_from_hf(hf.tokenizer_json, hf.tokenizer_config, 5));
  EXPECT_EQ(back.at("tokenizer.ggml.tokens"), kv[2].second);
  EXPECT_EQ(back.at("tokenizer.ggml.token_type"), kv[3].second);
}

// --- HF -> GGUF --------------------------------------------------------------------------------

TEST(TokenizerExport, PreTypeIsFoundFromTheRegexes) {
  const json starcoder =
      json{{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
  EXPECT_EQ(pre_of(byte_level_json(byte_level(true))), "gpt-2");
  EXPECT_EQ(pre_of(byte_level_json(starcoder)), "starcoder");
  // Names sharing a pre-tokenizer: clean_up_tokenization_spaces, then our own hint, choose.
  EXPECT_EQ(pre_of(byte_level_json(starcoder), {{"clean_up_tokenization_spaces", false}}), "smollm");
  EXPECT_EQ(pre_of(byte_level_json(starcoder), {{"gguf_tokenizer_pre", "refact"}}), "refact");
  EXPECT_EQ(pre_of(byte_level_json(starcoder), {{"gguf_tokenizer_pre", "qwen2"}}), "starcoder");
  const json falcon = {{"type", "Sequence"},
                       {"pretokenizers", json::array({{{"type", "Punctuation"}, {"behavior", "Contiguous"}},
                                                      byte_level(true),
                                                      {{"type", "Digits"}, {"individual_digits", false}},
                                                      split("[0-9][0-9][0-9]")})}};
  EXPECT_EQ(pre_of(byte_level_json(falcon)), "falcon");
  const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const json llama3_pre = {{"type", "Sequence"}, {"pretokenizers", json::array({split(llama3), byte_level(false)})}};
  EXPECT_EQ(pre_of(byte_level_json(llama3_pre, true)), "llama-bpe");
  EXPECT_EQ(pre_of(byte_level_json(llama3_pre, false)), "smaug-bpe");  // Llama-3 regex without ignore_merges
}

TEST(TokenizerExport, UnknownPreTokenizerIsAnErrorListingItsPatterns) {
  const json pre = {{"type", "Sequence"}, {"pretokenizers", json::array({split("[a-z]+"), byte_level(false)})}};
  const std::string e = error_of([&] { pre_of(byte_level_json(pre)); });
  EXPECT_NE(e.find("pre-tokenizer not recognised"), std::string::npos) << e;
  EXPECT_NE(e.find("[a-z]+"), std::string::npos) << e;
  EXPECT_NE(e.find("llama-bpe"), std::string::npos) << e;
  const json prefix = {{"type", "ByteLevel"}, {"add_prefix_space", true}};
  EXPECT_NE(error_of([&] { pre_of(byte_level_json(prefix)); }).find("adds no space"), std::string::npos);
  json lower = byte_level_json(byte_level(true));
  lower["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(error_of([&] { pre_of(lower); }).find("no llama.cpp equivalent"), std::string::npos);
}

TEST(TokenizerExport, SpmScoresFollowMergeRanks) {
  const json tj = {{"added_tokens", json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                                 {{"id", 1}, {"content", "<s>"}, {"special", true}},
                                                 {{"id", 8}, {"content", kSp + "x"}, {"special", false}}})},
                   {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", kSp}}})}}},
                   {"model",
                    {{"type", "BPE"},
                     {"byte_fallback", true},
                     {"unk_token", "<unk>"},
                     {"vocab", {{"<unk>", 0}, {"<s>", 1}, {"<0x41>", 2}, {"a", 3}, {"b", 4}, {"ab", 5}, {"ba", 6}, {"aba", 7}}},
                     {"merges", json::array({"b a", "a b", "ab a"})}}}};
  const auto m = as_map(mo::tok::gguf_tokenizer_kv_from_hf(tj, nullptr, 10));
  EXPECT_EQ(m.at("tokenizer.ggml.model").as_string(), "llama");
  EXPECT_EQ(m.at("tokenizer.ggml.pre").as_string(), "default");
  EXPECT_EQ(strings(m.at("tokenizer.ggml.tokens")),
            (std::vector<std::string>{"<unk>", "<s>", "<0x41>", "a", "b", "ab", "ba", "aba", " x", "[PAD9]"}));
  std::vector<int32_t> types;
  for (const auto& e : m.at("tokenizer.ggml.token_type").as_array()) types.push_back(static_cast<int32_t>(e.as_int()));
  EXPECT_EQ(types, (std::vector<int32_t>{2, 3, 6, 1, 1, 1, 1, 1, 4, 5}));
  // "ba" merges first: it keeps its SentencePiece-style score -(6 - 3); "ab" (-2) must drop below it.
  EXPECT_EQ(numbers(m.at("tokenizer.ggml.scores")), (std::vector<double>{0, 0, 0, 0, -1, -4, -3, -5, -1000, -1000}));
  EXPECT_EQ(m.at("tokenizer.ggml.unknown_token_id").as_int(), 0);
  EXPECT_EQ(m.count("tokenizer.ggml.add_space_prefix"), 0u);
  EXPECT_EQ(m.count("tokenizer.ggml.merges"), 0u);
}

TEST(TokenizerExport, MergesWithSpacesAndVocabSize) {
  json tj = byte_level_json(byte_level(true));
  tj["model"]["vocab"] = {{"a b", 0}, {"c", 1}, {"a bc", 2}};
  tj["model"]["merges"] = json::array({json::array({"a b", "c"})});
  const auto m = as_map(mo::tok::gguf_tokenizer_kv_from_hf(tj, nullptr, 6));
  EXPECT_EQ(strings(m.at("tokenizer.ggml.merges")), std::vector<std::string>{"a\xc4\xa0"
                                                                             "b c"});
  EXPECT_EQ(strings(m.at("tokenizer.ggml.tokens")).back(), "[PAD5]");
  EXPECT_EQ(m.at("tokenizer.ggml.token_type").as_array()[3].as_int(), 3);  // <|endoftext|>
  EXPECT_NE(error_of([&] { mo::tok::gguf_tokenizer_kv_from_hf(tj, nullptr, 3); }).find("does not fit vocab_size 3"), std::string::npos);
}

TEST(TokenizerExport, SpecialIdsComeFromConfigOrTemplate) {
  json tj = byte_level_json(byte_level(true));
  tj["post_processor"] = {{"type", "TemplateProcessing"},
                          {"single", json::array({{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}},
                                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}};
  auto m = as_map(mo::tok::gguf_tokenizer_kv_from_hf(tj, nullptr, 0));
  EXPECT_EQ(m.at("tokenizer.ggml.bos_token_id").as_int(), 3);
  EXPECT_TRUE(m.at("tokenizer.ggml.add_bos_token").as_bool());
  m = as_map(mo::tok::gguf_tokenizer_kv_from_hf(
      tj, {{"eos_token", {{"content", "<|endoftext|>"}}}, {"pad_token", "ab"}, {"add_bos_token", false}}, 0));
  EXPECT_EQ(m.count("tokenizer.ggml.bos_token_id"), 0u);
  EXPECT_EQ(m.at("tokenizer.ggml.eos_token_id").as_int(), 3);
  EXPECT_EQ(m.at("tokenizer.ggml.padding_token_id").as_int(), 2);
  EXPECT_FALSE(m.at("tokenizer.ggml.add_bos_token").as_bool());
}

TEST(TokenizerExport, PublishedHfTokenizers) {
  if (!std::filesystem::exists(kHf + "llama3/tokenizer.json")) GTEST_SKIP() << kHf << " not found";
  struct Case {
    const char* name;
    const char* model;
    const char* pre;
    std::size_t tokens, merges;
    int64_t bos, eos;  // -1: none
  };
  for (const Case& c :
       {Case{"llama2", "llama", "default", 32000, 0, 1, 2}, Case{"llama3", "gpt2", "llama-bpe", 128256, 280147, 128000, 128001},
        Case{"qwen3", "gpt2", "qwen2", 151669, 151387, -1, 151645}}) {
    SCOPED_TRACE(c.name);
    const json tj = mo::io::read_json(kHf + c.name + "/tokenizer.json");
    const json cfg = mo::io::read_json(kHf + c.name + "/tokenizer_config.json");
    const auto m = as_map(mo::tok::gguf_tokenizer_kv_from_hf(tj, cfg, 0));
    EXPECT_EQ(m.at("tokenizer.ggml.model").as_string(), c.model);
    EXPECT_EQ(m.at("tokenizer.ggml.pre").as_string(), c.pre);
    EXPECT_EQ(m.at("tokenizer.ggml.tokens").as_array().size(), c.tokens);
    EXPECT_EQ(m.count("tokenizer.ggml.merges") ? m.at("tokenizer.ggml.merges").as_array().size() : 0u, c.merges);
    if (c.merges) {
      EXPECT_EQ(tj["model"]["merges"].size(), c.merges);
    }
    EXPECT_EQ(m.count("tokenizer.ggml.bos_token_id") ? m.at("tokenizer.ggml.bos_token_id").as_int() : -1, c.bos);
    EXPECT_EQ(m.at("tokenizer.ggml.eos_token_id").as_int(), c.eos);
    EXPECT_EQ(m.count("tokenizer.chat_template"), cfg.contains("chat_template") ? 1u : 0u);
  }
}

TEST(TokenizerExport, WritesThreeFilesThatParseBack) {
  const auto hf = mo::tok::hf_tokenizer_from_gguf(vocab_file(tiny_spm()));
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("mo_tokexp_" + std::to_string(::getpid()));
  mo::tok::write_hf_tokenizer_files(hf, dir.string());
  EXPECT_EQ(mo::io::read_json((dir / "tokenizer.json").string()), hf.tokenizer_json);
  EXPECT_EQ(mo::io::read_json((dir / "tokenizer_config.json").string()), hf.tokenizer_config);
  EXPECT_EQ(mo::io::read_json((dir / "special_tokens_map.json").string()), hf.special_tokens_map);
  std::filesystem::remove_all(dir);
}

// --- GGUF -> HF -> GGUF round trips of real vocabularies ---------------------------------------

struct RoundTrip {
  std::map<std::string, Value> original;     // tokenizer.* keys of the file
  std::map<std::string, Value> regenerated;  // the same from the HF files
};

RoundTrip round_trip(const std::string& path) {
  const auto f = mo::gguf::read_metadata(path);
  const auto hf = mo::tok::hf_tokenizer_from_gguf(f);
  const auto n = static_cast<int64_t>(f.find("tokenizer.ggml.tokens")->as_array().size());
  RoundTrip rt;
  for (const auto& [k, v] : f.metadata)
    if (k.rfind("tokenizer.", 0) == 0) rt.original.emplace(k, v);
  rt.regenerated = as_map(mo::tok::gguf_tokenizer_kv_from_hf(hf.tokenizer_json, hf.tokenizer_config, n));
  return rt;
}

// Keys whose values differ, or that only one side has.
std::vector<std::string> differing_keys(const RoundTrip& rt) {
  std::vector<std::string> out;
  for (const auto& [k, v] : rt.original)
    if (!rt.regenerated.count(k) || !(rt.regenerated.at(k) == v)) out.push_back(k);
  for (const auto& [k, v] : rt.regenerated)
    if (!rt.original.count(k)) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::size_t> differing_elements(const Value& a, const Value& b) {
  std::vector<std::size_t> out;
  const auto& x = a.as_array();
  const auto& y = b.as_array();
  if (x.size() != y.size()) return {static_cast<std::size_t>(-1)};
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i])) out.push_back(i);
  return out;
}

TEST(TokenizerExportRoundTrip, Stories260K) {
  const std::string path = kData + "/models/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  const auto rt = round_trip(path);
  // Tokens, scores, types and ids come back; the file's 0xFFFFFFFF "no padding / separator token"
  // cannot be said in HF files, and llama.cpp's defaults for SPM (pre "default", BOS added, no EOS)
  // are now written out.
  EXPECT_EQ(differing_keys(rt),
            (std::vector<std::string>{"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token", "tokenizer.ggml.padding_token_id",
                                      "tokenizer.ggml.pre", "tokenizer.ggml.seperator_token_id"}));
  EXPECT_EQ(rt.original.at("tokenizer.ggml.padding_token_id").as_int(), 0xFFFFFFFF);
  EXPECT_TRUE(rt.regenerated.at("tokenizer.ggml.add_bos_token").as_bool());
  EXPECT_FALSE(rt.regenerated.at("tokenizer.ggml.add_eos_token").as_bool());
  EXPECT_EQ(rt.regenerated.at("tokenizer.ggml.pre").as_string(), "default");
}

TEST(TokenizerExportRoundTrip, LlamaSpmScoresKeepTheirOrder) {
  const std::string path = kVocab + "llama-spm.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  const auto rt = round_trip(path);
  EXPECT_EQ(differing_keys(rt), std::vector<std::string>{"tokenizer.ggml.scores"});
  // The 16 all-space pieces score -1e9 in Llama 2; HF merges only keep their rank (last), so they get
  // scores just below every other merge result instead.
  const auto& tokens = rt.original.at("tokenizer.ggml.tokens").as_array();
  const auto diff = differing_elements(rt.original.at("tokenizer.ggml.scores"), rt.regenerated.at("tokenizer.ggml.scores"));
  ASSERT_EQ(diff.size(), 16u);
  for (const auto i : diff) {
    EXPECT_EQ(tokens[i].as_string().find_first_not_of(kSp), std::string::npos);
    EXPECT_EQ(rt.original.at("tokenizer.ggml.scores").as_array()[i].as_number(), -1e9);
    EXPECT_LT(rt.regenerated.at("tokenizer.ggml.scores").as_array()[i].as_number(), -29000);
  }
}

TEST(TokenizerExportRoundTrip, Phi3) {
  const std::string path = kVocab + "phi-3.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  const auto rt = round_trip(path);
  EXPECT_EQ(differing_keys(rt), (std::vector<std::string>{"tokenizer.ggml.scores", "tokenizer.ggml.token_type"}));
  // <unk> was CONTROL and comes back UNKNOWN (HF only says "special"; SentencePiece calls it
  // unknown); the 53 "[PAD<id>]" tokens typed UNKNOWN come back CONTROL. Both are skipped alike
  // by llama.cpp when encoding plain text.
  const auto types = differing_elements(rt.original.at("tokenizer.ggml.token_type"), rt.regenerated.at("tokenizer.ggml.token_type"));
  ASSERT_EQ(types.size(), 54u);
  EXPECT_EQ(types.front(), 0u);
  EXPECT_EQ(types[1], 32011u);
  EXPECT_EQ(types.back(), 32063u);
  // Scores of control / padding tokens (llama.cpp wrote -1000 / -10000, we write SentencePiece's 0)
  // and of the 16 all-space pieces differ; control-token scores never take part in merging.
  const auto scores = differing_elements(rt.original.at("tokenizer.ggml.scores"), rt.regenerated.at("tokenizer.ggml.scores"));
  EXPECT_EQ(scores.size(), 16u + 13u + 53u);
}

class TokenizerExportByteLevel : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerExportByteLevel, RoundTrip) {
  const std::string name = GetParam();
  const std::string path = kVocab + name + ".gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  const auto rt = round_trip(path);
  std::vector<std::string> want;
  // llama.cpp's defaults (no BOS, no EOS for these pre types) are now written out.
  if (!rt.original.count("tokenizer.ggml.add_bos_token")) want = {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"};
  // gpt-neox has no tokenizer.ggml.pre: llama.cpp reads that as "default", which we now write.
  if (name == "gpt-neox") want.push_back("tokenizer.ggml.pre");
  // deepseek-coder marks "<pad>", "<｜fim▁hole｜>", "<|User|>", ... USER_DEFINED; convert_hf_to_gguf.py
  // (does_token_look_special) makes such tokens CONTROL, and so do we.
  if (name == "deepseek-coder") want.push_back("tokenizer.ggml.token_type");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(differing_keys(rt), want);
  for (const char* key : {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"}) {
    if (!rt.original.count(key)) {
      EXPECT_FALSE(rt.regenerated.at(key).as_bool()) << key;
    }
  }
  if (name == "gpt-neox") {
    EXPECT_EQ(rt.regenerated.at("tokenizer.ggml.pre").as_string(), "default");
  }
  if (name == "deepseek-coder") {
    const auto diff = differing_elements(rt.original.at("tokenizer.ggml.token_type"), rt.regenerated.at("tokenizer.ggml.token_type"));
    EXPECT_EQ(diff.size(), 7u);
    for (const auto i : diff) EXPECT_EQ(rt.regenerated.at("tokenizer.ggml.token_type").as_array()[i].as_int(), 3);
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, TokenizerExportByteLevel,
                         ::testing::Values("gpt-2", "falcon", "mpt", "starcoder", "refact", "deepseek-llm", "deepseek-coder", "gpt-neox"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
