// inspect --tokenize / --detokenize as a user runs them: text reaches the tokenizer exactly as typed, and
// any file that carries a tokenizer works, runnable model or not.
#include "cli_run.h"
#include "../unit/vocab_vectors.h"
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mo/io/gguf.h"
#include "mo/tokenizer/tokenizer.h"

namespace {

using mo::test::has;
using mo::test::run_cli;

const std::string kData = MO_SHARED_DATA;

// One shell word holding `s` byte for byte (spaces, newlines and quotes included).
std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string id_line(const std::vector<std::int32_t>& ids) {
  std::string line;
  for (std::size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  return line + "\n";
}

TEST(InspectCli, TokenizeKeepsLeadingSpaceAndTrailingNewline) {
  const std::string model = kData + "/models/stories260K.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " not found";
  const auto tok = mo::tok::load_tokenizer_gguf(mo::gguf::read_metadata(model));
  const std::string text = " hello\n";
  const auto want = tok->encode(text, true, true);
  ASSERT_NE(want, tok->encode("hello", true, true)) << "the test needs a text whose spaces change its ids";
  auto r = run_cli("inspect " + model + " --tokenize " + shell_quoted(text));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, id_line(want));
  // The same through a YAML config.
  const auto yaml = std::filesystem::temp_directory_path() / ("mo_inspect_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(yaml) << "tokenize: \" hello\\n\"\n";
  EXPECT_EQ(run_cli("inspect " + model + " --config " + yaml.string()).out, id_line(want));
  std::filesystem::remove(yaml);
}

// llama.cpp's vocab files hold tokenizer metadata and no tensors, with architectures the engine does not
// run (gpt2, mpt, starcoder2): their own test vectors must come out of the CLI.
TEST(InspectCli, TokenizeAndDetokenizeWorkOnVocabOnlyGgufOfAnyArchitecture) {
  for (const char* name : {"gpt-2", "mpt", "starcoder"}) {
    const std::string vocab = kData + "/tokenizers/llama-cpp-vocab/ggml-vocab-" + name + ".gguf";
    if (!std::filesystem::exists(vocab)) GTEST_SKIP() << vocab << " not found";
    int checked = 0;
    for (const auto& v : mo::test::read_vocab_vectors(vocab)) {
      if (v.input.empty() || checked == 6) continue;
      ++checked;
      auto ids = run_cli("inspect " + vocab + " --tokenize " + shell_quoted(v.input));
      EXPECT_EQ(ids.code, 0) << name << ": " << ids.err;
      EXPECT_EQ(ids.out, id_line(v.expected)) << name << " input '" << v.input << "'";
      const std::string line = id_line(v.expected);
      auto text = run_cli("inspect " + vocab + " --detokenize '" + line.substr(0, line.size() - 1) + "'");
      EXPECT_EQ(text.out, v.input + "\n") << name;
    }
    EXPECT_EQ(checked, 6) << name;
  }
}

TEST(InspectCli, TokenizeReadsADirectoryWithOnlyTokenizerJson) {
  const std::string dir = kData + "/tokenizers/hf/llama2";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " not found";
  auto r = run_cli("inspect " + dir + " --tokenize 'Hello world'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, id_line(mo::tok::load_tokenizer_json(dir)->encode("Hello world", true, true)));
  EXPECT_EQ(r.out, "1 22557 1526\n");  // hf/llama2 holds the Mistral-7B vocabulary
  auto none = run_cli("inspect " + kData + "/tokenizers --tokenize hi");
  EXPECT_EQ(none.code, 2);
  EXPECT_TRUE(has(none.err, "no tokenizer.json in this directory")) << none.err;
}

}  // namespace
