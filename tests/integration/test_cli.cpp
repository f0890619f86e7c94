// Runs the real binary the way a user does and checks what they would see: output, messages, exit codes.
#include "cli_run.h"
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

using Result = mo::test::CliResult;
using mo::test::has;

Result run(const std::string& args, const std::string& env = "") { return mo::test::run_cli(args, env); }

std::string temp_yaml(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(Cli, HelpListsEverySubcommandAndExitCodes) {
  auto r = run("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* sub : {"quantize", "serve", "bench", "diagnose", "budget", "eval", "generate", "convert", "inspect"})
    EXPECT_TRUE(has(r.out, sub)) << sub;
  EXPECT_TRUE(has(r.out, "Exit codes: 0 ok, 1 runtime failure"));
}

TEST(Cli, EverySubcommandHasHelpWithItsOptions) {
  for (const char* sub : {"quantize", "serve", "bench", "diagnose", "budget", "eval", "generate", "convert", "inspect"}) {
    auto r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_TRUE(has(r.out, "--config")) << sub;
  }
  auto q = run("quantize --help");
  for (const char* flag :
       {"--model_path", "--model-path", "--quant_method", "--bits", "--group_size", "--calibration_data", "--output_path"})
    EXPECT_TRUE(has(q.out, flag)) << flag;
  EXPECT_TRUE(has(run("serve --help").out, "--port"));
}

TEST(Cli, VersionNamesCommitBuildCudaAndSimd) {
  auto r = run("--version");
  EXPECT_EQ(r.code, 0);
  for (const char* part : {"model-optimizer 0.", "git commit:", "build type:", "cuda:", "simd:"}) EXPECT_TRUE(has(r.out, part)) << r.out;
}

TEST(Cli, ConvertInspectAndGenerateOnStories260K) {
  const std::string model = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " not found";
  const auto dir = std::filesystem::temp_directory_path() / ("mo_cli_convert_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string hf = (dir / "hf").string();
  auto conv = run("convert " + model + " " + hf);
  EXPECT_EQ(conv.code, 0) << conv.err;
  EXPECT_TRUE(has(conv.out, "48 tensors")) << conv.out;
  auto again = run("convert " + model + " " + hf);
  EXPECT_EQ(again.code, 2);
  EXPECT_TRUE(has(again.err, "already exists")) << again.err;

  auto info = nlohmann::json::parse(run("inspect " + hf + " --json").out);
  EXPECT_EQ(info["architecture"]["layers"], 5);
  EXPECT_EQ(info["parameters"], 292800);
  EXPECT_EQ(info["tokenizer"]["vocab_size"], 512);
  auto ids = run("inspect " + model + " --tokenize 'Once upon a time'");
  EXPECT_EQ(ids.out, run("inspect " + hf + " --tokenize 'Once upon a time'").out);
  EXPECT_EQ(run("inspect " + model + " --detokenize '" + ids.out.substr(0, ids.out.size() - 1) + "'").out, "Once upon a time\n");
  EXPECT_EQ(run("inspect " + model + " --detokenize '1 99999'").code, 2);

  auto gen = run("generate " + hf + " --max-tokens 60");
  EXPECT_EQ(gen.code, 0) << gen.err;
  EXPECT_EQ(gen.out,
            "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, "
            "red ball. She wanted to play with it, but it was too high");
  EXPECT_TRUE(has(gen.err, "generated tokens: 60")) << gen.err;
  std::filesystem::remove_all(dir);
}

// generate's --prompt is tokenized as serve's completion prompts (and llama-cli's): "<s>" is BOS, added once.
TEST(Cli, GeneratePromptParsesSpecialTokensAndAddsBosOnce) {
  const std::string model = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " not found";
  auto plain = run("generate " + model + " --prompt 'Once upon a time' --max-tokens 8");
  auto with_bos = run("generate " + model + " --prompt '<s>Once upon a time' --max-tokens 8");
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(with_bos.code, 0) << with_bos.err;
  EXPECT_EQ(with_bos.out, plain.out);
  const std::string tokens = run("inspect " + model + " --tokenize 'Once upon a time'").out;
  const auto count = std::count(tokens.begin(), tokens.end(), ' ') + 1;
  EXPECT_TRUE(has(plain.err, "prompt tokens: " + std::to_string(count) + " ")) << plain.err;
  EXPECT_TRUE(has(with_bos.err, "prompt tokens: " + std::to_string(count) + " ")) << with_bos.err;
}

TEST(Cli, MisspelledFlagExits2WithSuggestion) {
  auto r = run("budget --max-modle-len 5");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "unknown argument '--max-modle-len' (did you mean '--max-model-len'?)")) << r.err;
}

TEST(Cli, BadValueExits2NamingFlagAndExpectation) {
  auto r = run("budget --gpu-memory-utilization 1.5");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "flag --gpu_memory_utilization: gpu_memory_utilization: expected a number in [0.05, 1], got '1.5'")) << r.err;
}

TEST(Cli, MissingConfigFileExits2NamingIt) {
  auto r = run("budget --config /nonexistent/budget.yaml");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "config file not found: /nonexistent/budget.yaml")) << r.err;
}

TEST(Cli, MissingModelFileExits2NamingIt) {
  auto r = run("budget --model_path ./no/such/model.gguf");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "'./no/such/model.gguf' is neither a built-in preset nor an existing file")) << r.err;
}

TEST(Cli, FlagOverridesTheSameKeyInTheConfigFile) {
  std::string cfg = temp_yaml("budget.yaml", "model_path: llama-3-8b\nmax_model_len: 2048\nmax_num_seqs: 3\n");
  auto from_file = nlohmann::json::parse(run("budget --config " + cfg + " --json").out);
  EXPECT_EQ(from_file["settings"]["max_model_len"], 2048);
  auto overridden = nlohmann::json::parse(run("budget --config " + cfg + " --max-model-len 1024 --json").out);
  EXPECT_EQ(overridden["settings"]["max_model_len"], 1024);
  EXPECT_EQ(overridden["settings"]["max_num_seqs"], 3);
  auto underscore = nlohmann::json::parse(run("budget --config " + cfg + " --max_model_len 512 --json").out);
  EXPECT_EQ(underscore["settings"]["max_model_len"], 512);
  std::filesystem::remove(cfg);
}

TEST(Cli, UnknownKeyInConfigExits2) {
  std::string cfg = temp_yaml("bad.yaml", "model_path: llama-3-8b\ngpu_mem: 40\n");
  auto r = run("budget --config " + cfg);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, cfg + ":2: unknown key 'gpu_mem' for 'budget' (did you mean 'gpu_memory'?)")) << r.err;
  std::filesystem::remove(cfg);
}

TEST(Cli, BudgetTableShowsVerdictAndFormula) {
  auto r = run("budget --model llama-2-13b --weight-format fp16 --gpu rtx4090");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(has(r.out, "2 × 40 layers × 40 KV heads × 128 head_dim × 2 bytes = 819,200 bytes")) << r.out;
  EXPECT_TRUE(has(r.out, "does not fit")) << r.out;
  auto awq = run("budget --model llama-2-13b --weight-format awq-int4 --gpu rtx4090");
  EXPECT_TRUE(has(awq.out, "fits:")) << awq.out;
}

TEST(Cli, CompareFormatsPrintsARowPerFormat) {
  auto r = run("budget --model llama-3-8b --compare-formats");
  EXPECT_EQ(r.code, 0);
  for (const char* f : {"fp16", "fp8", "int8", "awq-int4", "gptq-int4", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "q8_0"})
    EXPECT_TRUE(has(r.out, f)) << f;
  auto j = nlohmann::json::parse(run("budget --model llama-3-8b --compare-formats --json").out);
  EXPECT_EQ(j.size(), 12u);
}

TEST(Cli, BooleanFlagsTakeNegation) {
  std::string cfg = temp_yaml("json.yaml", "json: true\n");
  const auto from_file = run("budget --config " + cfg);
  EXPECT_EQ(from_file.code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, run("budget --json").out);  // `json: true` is the --json flag
  EXPECT_TRUE(nlohmann::json::parse(from_file.out).contains("settings")) << from_file.out;
  EXPECT_TRUE(has(run("budget --config " + cfg + " --no-json").out, "component"));
  std::filesystem::remove(cfg);
}

TEST(Cli, PrintConfigShowsMergedValues) {
  auto r = run("budget --model llama-2-7b --max-num-seqs 8 --print-config");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(has(r.out, "model_path: llama-2-7b"));
  EXPECT_TRUE(has(r.out, "max_num_seqs: 8"));
}

TEST(Cli, BadLogLevelExits2) {
  auto r = run("--log-level loud budget");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "log level 'loud'")) << r.err;
}

TEST(Cli, LogLevelComesFromEnvironmentAndTheFlagWins) {
  auto debug = run("budget --model llama-2-7b", "MO_LOG_LEVEL=debug");
  EXPECT_EQ(debug.code, 0);
  EXPECT_TRUE(has(debug.err, "budget: llama-2-7b (llama) with 291 tensors")) << debug.err;
  auto quiet = run("--log-level warn budget --model llama-2-7b", "MO_LOG_LEVEL=debug");
  EXPECT_FALSE(has(quiet.err, "budget: llama-2-7b")) << quiet.err;
  EXPECT_EQ(run("budget", "MO_LOG_LEVEL=chatty").code, 2);
}

TEST(Cli, NoSubcommandPrintsHelpAndExits2) {
  auto r = run("");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "budget"));
}

}  // namespace

namespace {

// Without a GPU, --device cuda is a one-line usage error (exit 2) naming the device, in every command
// that runs the engine; auto falls back to the CPU.
TEST(Cli, DeviceCudaWithoutGpuSaysWhy) {
  const std::string model = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " not found";
  const std::string version = run("--version").out;
  if (has(version, "cuda:       on") && !has(version, "no GPU visible")) GTEST_SKIP() << "a GPU is visible";
  for (const std::string& cmd : {"generate " + model + " --max-tokens 4", "eval " + model + " --text none --no-latency --tasks x",
                                 "serve --model-path " + model + " --port 18999"}) {
    auto r = run(cmd + " --device cuda");
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.err;
    EXPECT_TRUE(has(r.err, "cuda")) << cmd << ": " << r.err;
    EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 2) << cmd << ": " << r.err;
  }
  auto r = run("generate " + model + " --max-tokens 4 --device auto");
  EXPECT_EQ(r.code, 0) << r.err;
}

}  // namespace
