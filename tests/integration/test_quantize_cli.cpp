// `quantize` on stories260K as a user runs it: a plain-text calibration file, and the log it leaves when
// stderr is a file rather than a terminal.
#include "cli_run.h"
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using mo::test::has;
using mo::test::run_cli;

const std::string kStories = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";

// Each test quantizes into its own folder, gone when the test ends.
class QuantizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " not found";
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("mo_quantize_cli_" + std::to_string(::getpid()) + "_" + test);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::vector<std::string> lines_with(const std::string& text, const std::string& part) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (has(line, part)) out.push_back(line);
  return out;
}

TEST_F(QuantizeCli, TextCalibrationFileGivesOneSamplePerParagraph) {
  const auto calib = dir_ / "calib.txt";
  std::ofstream(calib) << "Once upon a time there was a little fox.\nIt liked the park.\n\n"
                          "Tom had a red ball. He played with Sue.\n\n\n"
                          "The sun was warm and the birds sang.\n";
  const auto out = dir_ / "q.gguf";
  auto r = run_cli("quantize --model_path " + kStories + " --quant_method gguf --gguf_type q4_k_m --calibration_data " + calib.string() +
                   " --num_samples 3 --max_seq_len 32 --no-calibration-pack --no-eval --threads 2 --output_path " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_TRUE(has(r.err, "calib.txt (text paragraphs): 3 records; 3 truncated samples")) << r.err;
}

TEST_F(QuantizeCli, EmptyTextCalibrationFileIsOneLineNamingIt) {
  const auto calib = dir_ / "empty.txt";
  std::ofstream(calib) << "\n\n";
  auto r = run_cli("quantize --model_path " + kStories + " --quant_method gguf --gguf_type q4_k_m --calibration_data " + calib.string() +
                   " --no-eval --output_path " + (dir_ / "q.gguf").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(lines_with(r.err, "error"),
            std::vector<std::string>{"error: " + calib.string() +
                                     ": the file is empty; expected plain text (paragraphs separated by blank lines)"})
      << r.err;
}

// Off a terminal a progress bar prints about a dozen lines, not one per tensor, and always its last.
TEST_F(QuantizeCli, ProgressIsSparseWhenStderrIsNotATerminal) {
  auto r = run_cli("quantize --model_path " + kStories + " --quant_method gguf --gguf_type q8_0 --no-eval --threads 2 --output_path " +
                   (dir_ / "q8.gguf").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto progress = lines_with(r.err, "quantize: tensor ");
  ASSERT_FALSE(progress.empty()) << r.err;
  EXPECT_LE(progress.size(), 12u) << r.err;
  EXPECT_TRUE(has(progress.back(), "quantize: tensor 48/48 [####################]")) << progress.back();
  EXPECT_FALSE(has(r.err, "\033[K")) << "no terminal escapes in a log file";
}

}  // namespace

namespace {

// The job's memory is printed before quantizing starts; a job this machine cannot hold is refused up
// front, naming the terms and the num_samples that fits, and nothing is written.
TEST_F(QuantizeCli, PrintsTheJobsMemoryBeforeItStarts) {
  auto r = run_cli("quantize --model_path " + kStories + " --quant_method gptq --num_samples 4 --max_seq_len 32 --no-eval --threads 2" +
                   " --output_path " + (dir_ / "q").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "quantize memory (4 samples x 32 tokens): hidden states 32.00 KiB + captured inputs")) << r.err;
  EXPECT_TRUE(has(r.err, "+ GPTQ Hessians")) << r.err;
}

TEST_F(QuantizeCli, AJobThatDoesNotFitIsRefusedWithTheSamplesThatFit) {
  const auto out = dir_ / "q";
  auto r = run_cli(
      "quantize --model_path llama-2-7b --load-format dummy --quant_method gptq --num_samples 100000 --max_seq_len 4096"
      " --no-eval --output_path " +
      out.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "quantize: num_samples 100000 x max_seq_len 4096 needs")) << r.err;
  EXPECT_TRUE(has(r.err, "of host memory (")) << r.err;
  EXPECT_TRUE(has(r.err, "fits at max_seq_len 4096")) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// skip_layers is strict: a spec that does not parse or a range past the last layer ends the run before
// anything is written; a well-formed pattern that matches nothing is a warning naming the closest modules.
TEST_F(QuantizeCli, SkipLayersThatDoNotParseOrPassTheLastLayerAreErrors) {
  const auto out = dir_ / "q";
  const std::string base = "quantize --model_path " + kStories + " --quant_method rtn --no-eval --threads 2 --output_path " + out.string();
  auto r = run_cli(base + " --skip_layers 'lm_head,garbage!!'");
  EXPECT_EQ(r.code, 2) << r.err;
  const auto errors = lines_with(r.err, "error: ");
  ASSERT_EQ(errors.size(), 1u) << r.err;
  EXPECT_EQ(errors[0].rfind("error: skip_layers: 'garbage!!' is not a pattern; expected a module name", 0), 0u) << r.err;
  EXPECT_FALSE(fs::exists(out));

  r = run_cli(base + " --skip_layers 1-99");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "skip_layers: '1-99' reaches layer 99, but " + kStories + " has 5 layers (0-4)")) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(QuantizeCli, SkipLayersThatMatchNothingWarnWithTheClosestNamesAndLmHeadIsSilent) {
  const auto out = dir_ / "q";
  auto r = run_cli("quantize --model_path " + kStories + " --quant_method rtn --no-eval --threads 2 --skip_layers " +
                   "lm_head,model.layers.1.mlp.down_prj,3 --output_path " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "skip_layers: 'model.layers.1.mlp.down_prj' matched no module; the closest names: model.layers.1.mlp.down_proj"))
      << r.err;
  EXPECT_FALSE(has(r.err, "'lm_head'")) << r.err;
  EXPECT_FALSE(has(r.err, "'3' matched")) << r.err;
}

}  // namespace
