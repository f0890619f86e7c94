// Prefix caching as a server user sees it: a shared prompt prefix is computed once, freed blocks serve
// both as cache and as free space, and eviction under pressure takes only free blocks, never a running
// sequence's.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "mo/core/error.h"
#include "mo/engine/kv_cache.h"

namespace {

using mo::engine::BlockPool;
using mo::engine::KvCacheManager;

std::vector<std::int32_t> tokens(int n, int first) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<std::int32_t> concat(std::vector<std::int32_t> a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int> table(const KvCacheManager& m, std::int64_t id) {
  auto t = m.block_table(id);
  return {t.begin(), t.end()};
}

// A sequence whose K and V for all of `toks` are written and cached, as after a committed prefill.
void compute(KvCacheManager& m, std::int64_t id, const std::vector<std::int32_t>& toks) {
  m.add_sequence(id);
  ASSERT_TRUE(m.append(id, static_cast<int>(toks.size())));
  m.cache_full_blocks(id, toks);
}

TEST(KvBlockPool, PrefixCacheMapsOneBlockPerKeyUntilTheBlockIsReallocated) {
  BlockPool p(2);
  const int a = *p.allocate(), b = *p.allocate();
  p.mark_full(a);
  p.mark_full(b);
  EXPECT_TRUE(p.set_hash(a, 42));
  EXPECT_FALSE(p.set_hash(b, 42));  // a already holds these tokens: b stays out of the cache
  EXPECT_FALSE(p.meta(b).hash.has_value());
  EXPECT_EQ(p.cached_block(42), a);
  EXPECT_EQ(p.cached_block(43), std::nullopt);
  p.release(b);
  p.release(a);
  EXPECT_EQ(p.cached_block(42), a);  // free, still findable
  EXPECT_EQ(p.allocate(), b);        // freed first, reused first: a's contents survive
  EXPECT_EQ(p.cached_block(42), a);
  EXPECT_EQ(p.allocate(), a);  // now a is overwritten, so its key is gone
  EXPECT_EQ(p.cached_block(42), std::nullopt);
  EXPECT_EQ(p.num_cached(), 0);
}

TEST(KvPrefixCache, SharedPrefixIsReusedNotRecomputed) {
  KvCacheManager m(8, 8);
  const auto system = tokens(16, 100);  // two full blocks
  compute(m, 1, concat(system, {1, 2, 3}));
  const int free_before = m.num_free_blocks();

  m.add_sequence(2);
  EXPECT_EQ(m.take_cached_prefix(2, concat(system, {4})), 16);
  EXPECT_EQ(m.num_tokens(2), 16);
  const auto first = table(m, 1);
  EXPECT_EQ(table(m, 2), std::vector<int>(first.begin(), first.begin() + 2));
  EXPECT_EQ(m.pool().ref_count(first[0]), 2);
  EXPECT_EQ(m.num_free_blocks(), free_before);  // sharing takes no block
  const auto r = m.append(2, 1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->start_pos, 16);  // only the new token is computed
  EXPECT_TRUE(r->copies.empty());

  // Differing in the second block: only the first is shared.
  m.add_sequence(3);
  auto other = system;
  other[12] = 7;
  EXPECT_EQ(m.take_cached_prefix(3, concat(other, {4})), 8);
  EXPECT_EQ(m.prefix_cache_stats().queried_tokens, 17 + 17);
  EXPECT_EQ(m.prefix_cache_stats().hit_tokens, 16 + 8);
}

TEST(KvPrefixCache, PromptThatIsAllCachedLeavesItsLastTokenToCompute) {
  KvCacheManager m(8, 8);
  const auto prompt = tokens(16, 100);
  compute(m, 1, prompt);
  m.add_sequence(2);
  EXPECT_EQ(m.take_cached_prefix(2, prompt), 8);  // its last token's logits give the first output
}

TEST(KvPrefixCache, FreedBlocksAreBothCacheAndFreeSpace) {
  KvCacheManager m(4, 8);
  const auto prompt = tokens(16, 100);
  compute(m, 1, prompt);
  m.free(1);
  EXPECT_EQ(m.num_free_blocks(), 4);  // finished: every block can be allocated again

  m.add_sequence(2);
  EXPECT_EQ(m.take_cached_prefix(2, concat(prompt, {9})), 16);  // and the finished prompt is still cached
  EXPECT_EQ(m.num_free_blocks(), 2);
  m.free(2);

  m.add_sequence(3);
  ASSERT_TRUE(m.append(3, 32));  // all four blocks for an unrelated sequence
  EXPECT_EQ(m.num_free_blocks(), 0);
  m.free(3);
  m.add_sequence(4);
  EXPECT_EQ(m.take_cached_prefix(4, concat(prompt, {9})), 0);  // overwritten: computed again, never read stale
}

TEST(KvPrefixCache, EvictionUnderPressureTakesOnlyFreeBlocksOldestFirst) {
  KvCacheManager m(4, 8);
  const auto a = tokens(16, 100), b = tokens(16, 500);
  compute(m, 1, a);  // running: holds two cached blocks
  const auto a_table = table(m, 1);
  compute(m, 2, b);
  m.free(2);  // finished: its two blocks are free and cached, its second block freed first

  m.add_sequence(3);
  ASSERT_TRUE(m.append(3, 8));  // needs one block: evicts b's second block, not a running one
  EXPECT_EQ(table(m, 1), a_table);
  EXPECT_EQ(m.pool().ref_count(a_table[0]), 1);

  m.add_sequence(4);
  EXPECT_EQ(m.take_cached_prefix(4, concat(b, {1})), 8);  // b's first block survived
  m.add_sequence(5);
  EXPECT_EQ(m.take_cached_prefix(5, concat(a, {1})), 16);  // the running sequence's prefix is intact
  EXPECT_EQ(table(m, 5), a_table);

  // No free block is left: a sequence that must grow gets nullopt, and no one's blocks are taken.
  EXPECT_EQ(m.num_free_blocks(), 0);
  EXPECT_EQ(m.append(3, 1), std::nullopt);
  EXPECT_EQ(table(m, 1), a_table);
  EXPECT_EQ(m.num_tokens(3), 8);
}

TEST(KvPrefixCache, MisuseIsABugThatThrows) {
  KvCacheManager m(4, 8);
  m.add_sequence(1);
  ASSERT_TRUE(m.append(1, 4));
  EXPECT_THROW(m.take_cached_prefix(1, tokens(12, 0)), mo::Error);  // a cached prefix goes first
  EXPECT_THROW(m.cache_full_blocks(1, tokens(8, 0)), mo::Error);    // more tokens than slots
  EXPECT_THROW(m.take_cached_prefix(9, tokens(12, 0)), mo::Error);
}

}  // namespace
