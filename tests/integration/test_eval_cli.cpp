// `model-optimizer eval` as a user runs it on stories260K: the numbers printed, report.md/report.json,
// and the refusals.
#include "cli_run.h"
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

const std::string kData = MO_SHARED_DATA;
const std::string kStories = kData + "/models/stories260K.gguf";

using Result = mo::test::CliResult;
using mo::test::has;

// Runs `model-optimizer eval ARGS`.
Result run(const std::string& args) { return mo::test::run_cli("eval " + args); }

TEST(EvalCli, StoriesAgainstItselfPrintsLlamaCppPerplexityZeroKlAndWritesTheReport) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const auto dir = std::filesystem::temp_directory_path() / ("mo_eval_cli_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto r = run(kStories + " --base-model " + kStories + " --text tinystories --ctx 128 --tasks copa --limit 5 --latency-runs 1 " +
                     "--latency-prompt-tokens 16 --latency-output-tokens 8 --threads 2 --output-path " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  // llama-perplexity -c 128 on tinystories-sample.txt prints 6.8457.
  EXPECT_TRUE(has(r.out, "| perplexity (llama.cpp, ctx 128, 882 tokens) | 6.84")) << r.out;
  EXPECT_TRUE(has(r.out, "| KL divergence vs base, mean (nats) | — | 0.00000 |")) << r.out;
  EXPECT_TRUE(has(r.out, "| top-1 agreement with base (%) | — | 100.00 |")) << r.out;
  EXPECT_TRUE(has(r.out, "copa acc (%, 5 items)")) << r.out;
  EXPECT_TRUE(has(r.err, "eval: perplexity + KL (llama.cpp, ctx 128): windows 14/14")) << r.err;
  EXPECT_TRUE(has(r.out, "report: " + (dir / "report.md").string())) << r.out;
  std::ifstream md(dir / "report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), {});
  EXPECT_TRUE(has(text, "**Verdict:**")) << text;
  EXPECT_TRUE(has(text, "Tasks are limited to their first 5 items")) << text;
  const auto j = nlohmann::json::parse(std::ifstream(dir / "report.json"));
  EXPECT_EQ(j["model"]["kl"]["mean"].get<double>(), 0.0);
  EXPECT_EQ(j["model"]["perplexity"]["ppl"].get<double>(), j["base"]["perplexity"]["ppl"].get<double>());
  std::filesystem::remove_all(dir);
}

TEST(EvalCli, StridedMethodAndJsonOutput) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const auto r = run(kStories + " --text tinystories --ppl-method strided --ctx 128 --stride 64 --no-latency --json --threads 2");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["settings"]["ppl_method"], "strided");
  EXPECT_EQ(j["model"]["perplexity"]["tokens_scored"].get<long>() + 1, j["settings"]["text_tokens"].get<long>());
  EXPECT_FALSE(j.contains("base"));
}

TEST(EvalCli, BadInputsAreOneLineErrorsNamingTheKey) {
  auto r = run("");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "model_path: no model given")) << r.err;
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  r = run(kStories + " --text nosuchset");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "text: 'nosuchset' is neither a file nor a built-in text (wikitext2, tinystories)")) << r.err;
  r = run(kStories + " --tasks nosuchtask --text none");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "tasks: task 'nosuchtask' not found")) << r.err;
  r = run(kStories + " --ppl-method perplexity");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "ppl_method")) << r.err;
}

}  // namespace
