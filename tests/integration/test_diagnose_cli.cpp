// `model-optimizer diagnose` as a user runs it on stories260K: the table, the flagged layer, the advice,
// the report files, and the refusals.
#include "cli_run.h"
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <nlohmann/json.hpp>

#include "../unit/test_diagnose_fixture.h"

namespace {

const std::string kData = MO_SHARED_DATA;
const std::string kStories = kData + "/models/stories260K.gguf";
const std::string kText = kData + "/text/tinystories-sample.txt";

using Result = mo::test::CliResult;
using mo::test::has;

// Runs `model-optimizer diagnose ARGS`.
Result run(const std::string& args) { return mo::test::run_cli("diagnose " + args); }

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), {}};
}

const std::string kSmall = " --data " + kText + " --num-samples 4 --max-seq-len 64 --threads 2";

TEST(DiagnoseCli, StoriesAgainstItselfFlagsNothing) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const auto r = run("--original " + kStories + " --quantized " + kStories + kSmall);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "    0    1.00000    1.00000  q_proj 1.0000")) << r.out;
  EXPECT_TRUE(has(r.out, "final output: KL divergence mean 0.00000 nats")) << r.out;
  EXPECT_TRUE(has(r.out, "top-1 agreement 100.00 % over 256 tokens")) << r.out;
  EXPECT_TRUE(has(r.out, "flagged (local cosine < 0.98): 0 linears in 0 layers")) << r.out;
  EXPECT_FALSE(has(r.out, "FLAGGED")) << r.out;
  EXPECT_FALSE(has(r.out, "advice:")) << r.out;
}

TEST(DiagnoseCli, TwoBitLayerIsFlaggedAloneAndTheReportFilesSayHowToFixIt) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const auto dir = std::filesystem::temp_directory_path() / ("mo_diag_cli_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string fixture = (dir / "layer3-2bit.gguf").string();
  mo::test::write_fake_quantized_gguf(kStories, fixture, [](int layer) { return layer == 3 ? 2 : 8; });
  const auto r = run("--original " + kStories + " --quantized " + fixture + kSmall + " --output-path " + (dir / "out").string());
  ASSERT_EQ(r.code, 0) << r.err;
  int flagged_rows = 0;
  for (std::size_t at = r.out.find("FLAGGED"); at != std::string::npos; at = r.out.find("FLAGGED", at + 1)) ++flagged_rows;
  EXPECT_EQ(flagged_rows, 1) << r.out;
  EXPECT_TRUE(has(r.out, " linears in 1 layers")) << r.out;
  EXPECT_TRUE(has(r.out, "report: " + (dir / "out" / "diagnose.md").string())) << r.out;
  EXPECT_TRUE(has(r.err, "diagnose: layers 5/5")) << r.err;

  const auto j = nlohmann::json::parse(slurp(dir / "out" / "diagnose.json"));
  ASSERT_EQ(j["layers"].size(), 5u);
  for (const auto& l : j["layers"]) EXPECT_EQ(l["flagged"].get<bool>(), l["layer"].get<int>() == 3) << l.dump();
  // Which of the 2-bit layer's linears fall under 0.98 is the model's business; the advice must name every
  // one of them (a GGUF has no fused partners to add), and nothing else.
  std::set<std::string> under;
  for (const auto& x : j["layers"][3]["linears"]) {
    if (x["local"]["cosine"].get<double>() >= 0.98) continue;
    under.insert(x["module"].get<std::string>());
    EXPECT_TRUE(has(r.out, "advice: layer 3 " + x["name"].get<std::string>() + " below 0.98")) << r.out;
  }
  ASSERT_FALSE(under.empty()) << j["layers"][3].dump();
  EXPECT_EQ(j["advice"]["skip_layers"].get<std::set<std::string>>(), under);
  for (const auto& m : under) EXPECT_TRUE(has(r.out, "`skip_layers: [" + m)) << m << "\n" << r.out;
  EXPECT_GT(j["output"]["kl_mean"].get<double>(), 0.0);
  EXPECT_TRUE(has(slurp(dir / "out" / "diagnose.md"), "## Advice")) << slurp(dir / "out" / "diagnose.md");
  EXPECT_TRUE(has(slurp(dir / "out" / "diagnose.svg"), "cosine similarity by layer"));
  std::filesystem::remove_all(dir);
}

// Runs `model-optimizer CMD` (any subcommand) and returns its exit code.
int run_other(const std::string& cmd) { return std::system((std::string(MO_BINARY) + " " + cmd + " >/dev/null 2>&1").c_str()); }

TEST(DiagnoseCli, HfCopyOfAGgufComparesEqualIncludingTheReorderedQkRows) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const auto dir = std::filesystem::temp_directory_path() / ("mo_diag_hf_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string hf = (dir / "stories-hf").string();
  ASSERT_EQ(run_other("convert " + kStories + " " + hf), 0);
  const auto r = run("--original " + hf + " --quantized " + kStories + kSmall + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& l : j["layers"])
    for (const auto& x : l["linears"]) EXPECT_GT(x["local"]["cosine"].get<double>(), 0.999999) << x["module"];
  EXPECT_LT(j["output"]["kl_mean"].get<double>(), 1e-6);
  std::filesystem::remove_all(dir);
}

TEST(DiagnoseCli, JsonFlagPrintsTheResultAsJson) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const auto r = run("--original " + kStories + " --quantized " + kStories + kSmall + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["output"]["top1_agreement"].get<double>(), 1.0);
  EXPECT_EQ(j["layers"][4]["linears"][6]["module"], "model.layers.4.mlp.down_proj");
}

TEST(DiagnoseCli, MissingQuantizedModelExits2NamingTheFlag) {
  const auto r = run("--original " + kStories);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "quantized: no quantized model given (--quantized PATH)")) << r.err;
}

TEST(DiagnoseCli, MissingDataFileExits2NamingIt) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const auto r = run("--original " + kStories + " --quantized " + kStories + " --data /nonexistent/samples.jsonl");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "/nonexistent/samples.jsonl")) << r.err;
}

}  // namespace
