#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mo/core/error.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/engine.h"
#include "mo/eval/perplexity.h"
#include "mo/io/gguf.h"
#include "mo/model/model_files.h"
#include "mo/tokenizer/tokenizer.h"

namespace {

const std::string kData = MO_SHARED_DATA;
const std::string kStories = kData + "/models/stories260K.gguf";

// The text llama-perplexity -f sees: the file's bytes as they are, less one trailing '\n'. With
// `normalise_crlf`, CRLF becomes LF first.
std::string read_text(const std::string& path, bool normalise_crlf) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str(), out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i)
    if (!(normalise_crlf && s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n')) out.push_back(s[i]);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

struct Stories {
  mo::model::ModelFiles files = mo::model::ModelFiles::open(kStories);
  mo::ThreadPool pool{2};
  mo::engine::Engine engine{mo::engine::bind_weights(files), pool};
  std::unique_ptr<mo::tok::Tokenizer> tok = mo::tok::load_tokenizer_gguf(*files.gguf());
};

// Reference: llama-perplexity -m stories260K.gguf -f tinystories-sample.txt -c 128 => PPL 6.8457 over 14 chunks.
TEST(Perplexity, Stories260KTinyStoriesMatchesLlamaCpp) {
  const std::string text_path = kData + "/text/tinystories-sample.txt";
  if (!std::filesystem::exists(kStories) || !std::filesystem::exists(text_path)) GTEST_SKIP() << "stories260K or text missing";
  Stories s;
  auto r = mo::eval::perplexity_llama_cpp(s.engine, *s.tok, read_text(text_path, true), 128, 0);
  std::printf("tinystories n_ctx=128: ppl %.4f over %d windows (%lld tokens)\n", r.ppl, r.windows, static_cast<long long>(r.tokens_scored));
  EXPECT_EQ(r.windows, 14);
  EXPECT_EQ(r.tokens_scored, 14 * 63);
  ASSERT_EQ(r.ppl_after_window.size(), 14u);
  EXPECT_DOUBLE_EQ(r.ppl_after_window.back(), r.ppl);
  EXPECT_NEAR(r.ppl, 6.8457, 6.8457 * 1e-3);
}

// Reference: llama-perplexity ... -f wikitext-2-raw/wiki.test.raw -c 256 --chunks 20 => PPL 139.32.
// That number is for the file as shipped, CRLF line ends included (llama.cpp reads the bytes as they
// are, and "\r\n" tokenizes to <0x0D> <0x0A>); with CRLF normalised to LF the same windows give ~118.44.
TEST(Perplexity, Stories260KWikitext2First20WindowsMatchesLlamaCpp) {
  const std::string text_path = kData + "/text/wikitext2-test-raw.txt";
  if (!std::filesystem::exists(kStories) || !std::filesystem::exists(text_path)) GTEST_SKIP() << "stories260K or text missing";
  Stories s;
  auto r = mo::eval::perplexity_llama_cpp(s.engine, *s.tok, read_text(text_path, false), 256, 20);
  std::printf("wikitext2 n_ctx=256: ppl %.4f over %d windows\n", r.ppl, r.windows);
  EXPECT_EQ(r.windows, 20);
  EXPECT_EQ(r.tokens_scored, 20 * 127);
  EXPECT_NEAR(r.ppl, 139.32, 139.32 * 1e-3);
}

TEST(Perplexity, TooShortTextIsAUsageErrorNamingTheTokenCount) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  Stories s;
  try {
    mo::eval::perplexity_llama_cpp(s.engine, *s.tok, "Once upon a time", 128, 0);
    FAIL() << "expected UsageError";
  } catch (const mo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("needs at least 256"), std::string::npos) << e.what();
  }
}

}  // namespace
