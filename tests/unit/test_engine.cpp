#include <gtest/gtest.h>

#include <filesystem>

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

}  // namespace
