// `quantize` evaluates its output against the source and writes report.md into the new directory,
// unless --no-eval.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

const std::string kStories = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";

int run_quantize(const std::string& args, std::string* out) {
  const std::string cmd = std::string(MO_BINARY) + " quantize " + args + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, got);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

TEST(EvalQuantize, QuantizeWritesTheReportWithDeltasAndThePerLayerSummary) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const auto dir = std::filesystem::temp_directory_path() / ("mo_eval_quantize_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto calib = dir / "calib.jsonl";
  {
    std::ofstream c(calib);
    for (int i = 0; i < 32; ++i) c << "{\"text\": \"Tom had a red ball number " << i << ". He played in the park with Sue.\"}\n";
  }
  const std::string common = "--model_path " + kStories + " --quant_method rtn --group_size 32 --calibration_data " + calib.string() +
                             " --num_samples 8 --max_seq_len 64 --threads 2 ";
  std::string out;
  ASSERT_EQ(
      run_quantize(common + "--output_path " + (dir / "q").string() +
                       " --eval-text tinystories --eval-ctx 128 --eval-ppl-windows 14 --eval-tasks copa --eval-limit 10 --no-eval-latency",
                   &out),
      0)
      << out;
  EXPECT_TRUE(has(out, "verdict: RTN INT4 g32: ")) << out;
  EXPECT_TRUE(has(out, "report: " + (dir / "q" / "report.md").string())) << out;
  std::ifstream in(dir / "q" / "report.md");
  const std::string md((std::istreambuf_iterator<char>(in)), {});
  EXPECT_TRUE(has(md, "# RTN INT4 g32: stories260K.gguf → q")) << md;
  EXPECT_TRUE(has(md, "| metric | base | model | delta |")) << md;
  EXPECT_TRUE(has(md, "## Per-layer decisions")) << md;
  EXPECT_TRUE(has(md, "Tasks are limited to their first 10 items (eval_limit)")) << md;
  const auto j = nlohmann::json::parse(std::ifstream(dir / "q" / "report.json"));
  // The base is the file llama.cpp measured: llama-perplexity -c 128 on this text prints 6.8457 over 14 chunks.
  const double base = j["base"]["perplexity"]["ppl"].get<double>(), model = j["model"]["perplexity"]["ppl"].get<double>();
  EXPECT_NEAR(base, 6.8457, 6.8457 * 1e-3);
  EXPECT_EQ(j["base"]["perplexity"]["tokens_scored"], 14 * 63);
  EXPECT_GT(j["model"]["kl"]["mean"].get<double>(), 0.0);  // INT4 changes the distribution
  // The rows' deltas, recomputed from the values: relative change for perplexity (higher is worse), a ratio for size.
  char row[256];
  std::snprintf(row, sizeof row, "| perplexity (llama.cpp, ctx 128, 882 tokens) | %.4f | %.4f | %s%+.2f%% %s%s |", base, model,
                model > base ? "**" : "", (model - base) / base * 100, model > base ? "worse" : "better", model > base ? "**" : "");
  EXPECT_TRUE(has(md, row)) << row << "\n" << md;
  const double base_bytes = static_cast<double>(std::filesystem::file_size(kStories));
  EXPECT_EQ(j["base"]["disk_bytes"].get<double>(), base_bytes);
  const double model_bytes = j["model"]["disk_bytes"].get<double>();
  ASSERT_LT(model_bytes, base_bytes);  // INT4 of an F32 file
  std::snprintf(row, sizeof row, "| size on disk (MiB) | %.1f | %.1f | %.2fx smaller better |", base_bytes / 1048576, model_bytes / 1048576,
                base_bytes / model_bytes);
  EXPECT_TRUE(has(md, row)) << row << "\n" << md;

  out.clear();
  ASSERT_EQ(run_quantize(common + "--output_path " + (dir / "n").string() + " --no-eval", &out), 0) << out;
  EXPECT_FALSE(has(out, "report:")) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "n" / "report.md"));
  std::filesystem::remove_all(dir);
}

}  // namespace
