// Perplexity windows (both methods) and the KL-divergence comparison of models on one text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "mo/core/error.h"
#include "mo/core/thread_pool.h"
#include "mo/eval/eval_data.h"
#include "mo/eval/text_metrics.h"
#include "mo/model/model_files.h"
#include "engine_logits.h"

namespace {

const std::string kData = MO_SHARED_DATA;
const std::string kStories = kData + "/models/stories260K.gguf";

struct Loaded {
  mo::model::ModelFiles files = mo::model::ModelFiles::open(kStories);
  mo::ThreadPool pool{2};
  mo::engine::Engine engine{mo::engine::bind_weights(files), pool};
  std::unique_ptr<mo::tok::Tokenizer> tok = mo::tok::load_tokenizer_gguf(*files.gguf());
};

TEST(EvalWindows, StridedScoresEveryTokenAfterTheFirstExactlyOnce) {
  for (int stride : {1, 7, 64, 127}) {
    const auto windows = mo::eval::plan_ppl_windows(mo::eval::PplMethod::strided, 1000, 128, stride, 0, true);
    std::vector<int> scored(1000, 0);
    for (const auto& w : windows) {
      EXPECT_FALSE(w.bos_first);
      EXPECT_LE(w.len, 128);
      for (int j = w.first_row; j < w.len - 1; ++j) scored[static_cast<std::size_t>(w.start + j + 1)]++;
    }
    EXPECT_EQ(scored[0], 0) << "stride " << stride;
    for (int t = 1; t < 1000; ++t) ASSERT_EQ(scored[static_cast<std::size_t>(t)], 1) << "token " << t << " stride " << stride;
  }
}

// Hugging Face's loop with stride == n_ctx: each window's first token has no context and is not scored.
TEST(EvalWindows, StrideEqualToTheWindowSkipsEachWindowsFirstToken) {
  const auto windows = mo::eval::plan_ppl_windows(mo::eval::PplMethod::strided, 1000, 128, 128, 0, true);
  ASSERT_EQ(windows.size(), 8u);
  std::int64_t scored = 0;
  for (const auto& w : windows) scored += w.len - 1 - w.first_row;
  EXPECT_EQ(scored, 1000 - 8);
}

TEST(EvalWindows, LlamaCppScoresTheSecondHalfOfWholeWindows) {
  const auto windows = mo::eval::plan_ppl_windows(mo::eval::PplMethod::llama_cpp, 1000, 128, 0, 0, true);
  ASSERT_EQ(windows.size(), 7u);  // 1000 / 128, the tail dropped
  EXPECT_EQ(windows[3].start, 384);
  EXPECT_EQ(windows[3].first_row, 64);
  EXPECT_TRUE(windows[3].bos_first);
  EXPECT_EQ(mo::eval::plan_ppl_windows(mo::eval::PplMethod::llama_cpp, 1000, 128, 0, 2, true).size(), 2u);
}

TEST(EvalWindows, StrideLargerThanTheWindowIsRefused) {
  try {
    mo::eval::plan_ppl_windows(mo::eval::PplMethod::strided, 1000, 128, 200, 0, false);
    FAIL() << "expected UsageError";
  } catch (const mo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("stride must be between 1 and ctx (128), got 200"), std::string::npos) << e.what();
  }
}

TEST(EvalKl, RowOfIdenticalLogitsIsZeroAndAgrees) {
  const std::vector<float> a = {1.0f, 3.0f, -2.0f, 0.5f};
  bool same = false;
  EXPECT_EQ(mo::eval::kl_divergence_row(a.data(), a.data(), 4, &same), 0.0);
  EXPECT_TRUE(same);
}

TEST(EvalKl, RowMatchesTheClosedForm) {
  // p = softmax(0, ln 3) = (1/4, 3/4), q = uniform: KL = 1/4 ln(1/2) + 3/4 ln(3/2).
  const std::vector<float> p = {0.0f, static_cast<float>(std::log(3.0))}, q = {0.0f, 0.0f};
  bool same = true;
  const double kl = mo::eval::kl_divergence_row(p.data(), q.data(), 2, &same);
  EXPECT_NEAR(kl, 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-6);
  EXPECT_FALSE(same);  // argmax 1 vs 0 (ties go to the first index)
}

TEST(EvalKl, QuantileInterpolatesLinearly) {
  std::vector<double> v;
  for (int i = 100; i >= 0; --i) v.push_back(i);
  EXPECT_DOUBLE_EQ(mo::eval::quantile(v, 0.99), 99.0);
  EXPECT_DOUBLE_EQ(mo::eval::quantile({1, 2}, 0.5), 1.5);
  EXPECT_DOUBLE_EQ(mo::eval::quantile({}, 0.99), 0.0);
}

TEST(EvalText, OneModelGivesLlamaCppPerplexityAndAModelAgainstItselfHasZeroKl) {
  const std::string text_path = kData + "/text/tinystories-sample.txt";
  if (!std::filesystem::exists(kStories) || !std::filesystem::exists(text_path)) GTEST_SKIP() << "stories260K or text missing";
  Loaded a, b;
  const std::string text = mo::eval::read_eval_text(text_path);
  mo::eval::PplSettings s;
  s.n_ctx = 128;
  std::vector<mo::engine::Engine*> models = {&a.engine, &b.engine};
  const auto r = mo::eval::evaluate_text(models, *a.tok, text, s);
  ASSERT_EQ(r.ppl.size(), 2u);
  EXPECT_EQ(r.ppl[0].windows, 14);
  EXPECT_NEAR(r.ppl[0].ppl, 6.8457, 6.8457 * 1e-3);  // llama-perplexity -c 128 on this file
  EXPECT_EQ(r.ppl[1].ppl, r.ppl[0].ppl);
  EXPECT_EQ(r.kl[1].mean, 0.0);
  EXPECT_EQ(r.kl[1].p99, 0.0);
  EXPECT_EQ(r.kl[1].top1_agreement, 1.0);
  EXPECT_EQ(r.kl[1].tokens, 14 * 63);
}

// Hugging Face's loop ("Perplexity of fixed-length models"), written from its description: a window of ctx
// tokens every `stride`, each from a fresh context, whose labels are only the last end - prev_end tokens
// (the ones no earlier window reached); a window's first token has no logits before it.
double hf_strided_ppl(mo::engine::Engine& e, const std::vector<std::int32_t>& ids, int ctx, int stride, std::int64_t* scored) {
  const auto n = static_cast<std::int64_t>(ids.size());
  const std::int64_t vocab = e.hparams().vocab_size;
  double nll = 0;
  std::int64_t count = 0, prev_end = 0;
  for (std::int64_t begin = 0; begin < n; begin += stride) {
    const std::int64_t end = std::min<std::int64_t>(begin + ctx, n), targets = end - prev_end;
    const auto logits = mo::test::layer_by_layer_logits(e, std::span(ids.data() + begin, static_cast<std::size_t>(end - begin)));
    for (std::int64_t pos = std::max(end - targets, begin + 1); pos < end; ++pos) {
      const float* row = logits.data() + (pos - begin - 1) * vocab;
      double mx = row[0], sum = 0;
      for (std::int64_t v = 1; v < vocab; ++v) mx = std::max<double>(mx, row[v]);
      for (std::int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
      nll += mx + std::log(sum) - row[ids[static_cast<std::size_t>(pos)]];
      ++count;
    }
    prev_end = end;
    if (end == n) break;
  }
  *scored = count;
  return std::exp(nll / static_cast<double>(count));
}

TEST(EvalText, StridedPerplexityIsHuggingFacesLoopOverTheEnginesLogits) {
  const std::string text_path = kData + "/text/tinystories-sample.txt";
  if (!std::filesystem::exists(kStories) || !std::filesystem::exists(text_path)) GTEST_SKIP() << "stories260K or text missing";
  Loaded a;
  std::vector<mo::engine::Engine*> models = {&a.engine};
  mo::eval::PplSettings s;
  s.method = mo::eval::PplMethod::strided;
  s.n_ctx = 128;
  s.stride = 48;  // windows overlap by 80 tokens, and the last one is cut short by the end of the text
  s.kv_dtype = mo::engine::KvDtype::f32;
  const std::string text = mo::eval::read_eval_text(text_path);
  const auto r = mo::eval::evaluate_text(models, *a.tok, text, s);
  std::int64_t scored = 0;
  const double want = hf_strided_ppl(a.engine, a.tok->encode(text, true, false), s.n_ctx, s.stride, &scored);
  std::printf("strided ctx 128 stride 48: ppl %.6f, Hugging Face's loop %.6f over %lld tokens\n", r.ppl[0].ppl, want,
              static_cast<long long>(scored));
  EXPECT_EQ(r.ppl[0].tokens_scored, r.text_tokens - 1);  // every token after the first, once
  EXPECT_EQ(r.ppl[0].tokens_scored, scored);
  EXPECT_NEAR(r.ppl[0].ppl, want, 1e-6 * want);  // f32 KV; llama.cpp sums exp in float, this test in double
}

TEST(EvalData, CrlfIsNormalisedAndOneTrailingNewlineDropped) {
  const auto path = std::filesystem::temp_directory_path() / ("mo_eval_crlf_" + std::to_string(::getpid()) + ".txt");
  { std::ofstream(path, std::ios::binary) << "a\r\nb\rc\n\n"; }
  EXPECT_EQ(mo::eval::read_eval_text(path.string()), "a\nb\nc\n");
  std::filesystem::remove(path);
}

// Reports print the built-in text and task paths: the shared folder as a user types it from the checkout
// ("../shared/data/..."), not the build's absolute path; from "/" there is nothing shorter to print.
TEST(EvalData, BuiltInFolderIsPrintedRelativeToTheWorkingDirectory) {
  namespace fs = std::filesystem;
  if (!fs::exists(kData)) GTEST_SKIP() << kData << " not found (the shared data)";
  const char* env = std::getenv("MO_EVAL_DATA");
  const std::string saved_env = env ? env : "";
  ::unsetenv("MO_EVAL_DATA");
  const fs::path cwd = fs::current_path();
  const fs::path here = mo::eval::eval_data_dir();
  EXPECT_TRUE(here.is_relative()) << here;
  EXPECT_EQ(fs::absolute(here).lexically_normal(), fs::path(kData).lexically_normal()) << here;
  if (fs::exists(kData + "/tasks/arc_easy.jsonl")) {
    EXPECT_EQ(mo::eval::resolve_task_path("arc_easy", "tasks"), (here / "tasks" / "arc_easy.jsonl").string());
  }
  fs::current_path("/");
  EXPECT_EQ(fs::path(mo::eval::eval_data_dir()), fs::path(kData).lexically_normal());
  fs::current_path(cwd);
  ::setenv("MO_EVAL_DATA", "my-data", 1);
  EXPECT_EQ(mo::eval::eval_data_dir(), "my-data");  // as the user set it
  if (saved_env.empty())
    ::unsetenv("MO_EVAL_DATA");
  else
    ::setenv("MO_EVAL_DATA", saved_env.c_str(), 1);
}

TEST(EvalData, UnknownTextNamesTheKeyAndTheBuiltIns) {
  try {
    mo::eval::resolve_text_path("wikitext3", "text");
    FAIL() << "expected UsageError";
  } catch (const mo::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "text: 'wikitext3' is neither a file nor a built-in text (wikitext2, tinystories)");
  }
}

}  // namespace
