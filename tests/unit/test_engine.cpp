#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "mo/core/error.h"

#include "mo/core/thread_pool.h"
#include "mo/engine/engine.h"
#include "mo/engine/kv_cache.h"
#include "mo/io/gguf.h"
#include "mo/model/model_files.h"
#include "mo/tokenizer/tokenizer.h"

namespace {

const std::string kStories = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";

// Greedy decoding of n tokens after `prompt`, one sequence, through the paged KV cache.
std::vector<std::int32_t> greedy(mo::engine::Engine& e, std::vector<std::int32_t> prompt, int n) {
  using namespace mo::engine;
  KvLayout L = e.kv_layout();
  KvCacheManager mgr(64, L.block_size);
  KvStorage kv(L, 64);
  mgr.add_sequence(1);
  std::vector<std::int32_t> out;
  std::vector<std::int32_t> step = prompt;
  for (int i = 0; i < n; ++i) {
    auto app = mgr.append(1, static_cast<int>(step.size()));
    EXPECT_TRUE(app.has_value());
    SeqChunk c{step, app->start_pos, app->slots, mgr.block_table(1), false};
    auto logits = e.forward(std::span<const SeqChunk>(&c, 1), kv);
    std::int32_t best = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(best);
    step = {best};
  }
  return out;
}

TEST(Engine, Stories260KGreedyFromBosTellsTheStory) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  auto files = mo::model::ModelFiles::open(kStories);
  mo::ThreadPool pool(2);
  mo::engine::Engine e(mo::engine::bind_weights(files), pool);
  auto ids = greedy(e, {1}, 60);
  auto tok = mo::tok::load_tokenizer_gguf(*files.gguf());
  EXPECT_EQ(tok->decode(ids),
            "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, "
            "red ball. She wanted to play with it, but it was too high");
}

// An engine built on the default pool shares it: replacing the default thread count afterwards (as a
// later --threads does) installs a new pool for later callers and leaves this engine's pool running.
TEST(Engine, KeepsRunningWhenTheDefaultThreadCountIsReplaced) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  auto files = mo::model::ModelFiles::open(kStories);
  mo::set_default_threads(2);
  mo::engine::Engine e(mo::engine::bind_weights(files), mo::default_pool());
  const auto before = greedy(e, {1}, 12);
  mo::set_default_threads(3);
  EXPECT_EQ(mo::default_pool()->size(), 3);
  EXPECT_EQ(greedy(e, {1}, 12), before);
  mo::set_default_threads(0);
}

}  // namespace

namespace {

// The quantizers' entry points (embed, run_layer, logits) must compute what forward() computes, and
// show each linear sub-layer its real input.
TEST(Engine, PerLayerAccessMatchesForwardAndObservesEveryLinear) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  using namespace mo::engine;
  auto files = mo::model::ModelFiles::open(kStories);
  mo::ThreadPool pool(2);
  Engine e(bind_weights(files), pool);
  const std::vector<std::int32_t> prompt = {1, 403, 407, 261, 378, 300, 200};  // BOS "Once upon a time" ...

  KvLayout L = e.kv_layout(16, KvDtype::f32);
  KvCacheManager mgr(4, L.block_size);
  KvStorage kv(L, 4);
  mgr.add_sequence(1);
  auto app = mgr.append(1, static_cast<int>(prompt.size()));
  SeqChunk c{prompt, 0, app->slots, mgr.block_table(1), true};
  std::vector<float> expect = e.forward(std::span<const SeqChunk>(&c, 1), kv);

  const std::int64_t n = static_cast<std::int64_t>(prompt.size()), h = e.hparams().hidden_size;
  std::vector<float> hidden(n * h);
  e.embed(prompt, hidden.data());
  std::map<std::pair<int, LinearId>, std::int64_t> seen;  // (layer, linear) -> input width
  LinearObserver obs = [&](int layer, LinearId id, const float* x, std::int64_t rows, std::int64_t dim) {
    EXPECT_EQ(rows, n);
    EXPECT_TRUE(std::isfinite(x[0]));
    seen[{layer, id}] = dim;
  };
  for (int l = 0; l < e.hparams().num_layers; ++l) e.run_layer(l, hidden.data(), n, 0, &obs);
  std::vector<float> got(n * e.hparams().vocab_size);
  e.logits(hidden.data(), n, got.data());
  ASSERT_EQ(got.size(), expect.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expect[i], 1e-4) << i;

  EXPECT_EQ(seen.size(), 5u * 7u);
  EXPECT_EQ((seen[{0, LinearId::q}]), 64);
  EXPECT_EQ((seen[{4, LinearId::down}]), 172);  // down_proj sees the FFN width
  EXPECT_THROW(e.run_layer(0, hidden.data(), n, 3), mo::Error);
}

}  // namespace
