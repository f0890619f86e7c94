// inspect --tokenize / --detokenize as a user runs them: text reaches the tokenizer exactly as typed.
#include "cli_run.h"
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mo/io/gguf.h"
#include "mo/tokenizer/tokenizer.h"

namespace {

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

}  // namespace
