#pragma once
// What the quantize tests share: the stories260K model, a scratch directory, an in-domain calibration
// file and greedy decoding from BOS.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mo/config/commands.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/generator.h"
#include "mo/model/model_files.h"
#include "mo/tokenizer/tokenizer.h"

namespace quant_test {

namespace fs = std::filesystem;

inline const std::string kStories = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
inline const std::string kText = std::string(MO_SHARED_DATA) + "/text/tinystories-sample.txt";

// A test that reads stories260K is skipped, naming the path, where the shared data is absent (docs/building.md).
#define MO_SKIP_WITHOUT_STORIES()                                                                             \
  do {                                                                                                        \
    if (!std::filesystem::exists(quant_test::kStories)) GTEST_SKIP() << quant_test::kStories << " not found"; \
  } while (0)

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& prefix = "mo-quant-test-")
      : path(fs::temp_directory_path() / (prefix + std::to_string(::getpid()) + "-" + std::to_string(counter()++))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

// A small JSONL calibration file from TinyStories text (in-domain for stories260K).
inline std::string write_calibration(const fs::path& dir) {
  std::ifstream in(kText);
  std::string line, path = (dir / "calib.jsonl").string();
  std::ofstream out(path);
  while (std::getline(in, line))
    if (line.size() > 20) out << nlohmann::json({{"text", line}}).dump() << "\n";
  return path;
}

// Quantizing stories260K quickly: 4-bit request, group 32, 8 calibration samples of 64 tokens, no evaluation.
inline mo::quant::QuantizeOptions stories_config(mo::quant::Method method, const fs::path& out, const std::string& calib) {
  mo::quant::QuantizeOptions c;
  c.model_path = kStories;
  c.output_path = out.string();
  c.method = method;
  c.group_size = 32;
  c.calibration_data = calib;
  c.num_samples = 8;
  c.max_seq_len = 64;
  return c;
}

// The first `n` greedy tokens from BOS, by our engine, of a GGUF file or an HF directory.
inline std::vector<std::int32_t> greedy(const std::string& model, int n) {
  auto files = mo::model::ModelFiles::open(model);
  auto tok = files.gguf() ? mo::tok::load_tokenizer_gguf(*files.gguf()) : mo::tok::load_tokenizer_json(files.tokenizer_path());
  mo::engine::Engine engine(mo::engine::bind_weights(files), mo::default_pool());
  mo::engine::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {*tok->special().bos};
  return mo::engine::generate(engine, *tok, prompt, p, {}, [](std::string_view) {}).output_ids;
}

// Length of the common prefix.
inline int agreeing(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  int n = 0;
  while (n < static_cast<int>(std::min(a.size(), b.size())) && a[n] == b[n]) ++n;
  return n;
}

}  // namespace quant_test
