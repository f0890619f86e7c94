#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/engine/kv_cache.h"
#include "mo/engine/kv_storage.h"

namespace {

using mo::engine::AppendResult;
using mo::engine::BlockCopy;
using mo::engine::BlockPool;
using mo::engine::KvCacheManager;
using mo::engine::KvDtype;
using mo::engine::KvLayout;
using mo::engine::KvStorage;

std::vector<int> table(const KvCacheManager& m, std::int64_t id) {
  auto t = m.block_table(id);
  return {t.begin(), t.end()};
}

std::vector<int> iota(int first, int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const mo::Error& e) {
    return e.what();
  }
  return "(no exception)";
}

// ---- layout ----

TEST(KvLayout, BytesPerBlockCountsKAndVOfEveryLayer) {
  struct Case {
    KvLayout layout;
    std::size_t bytes_per_block;
  };
  const Case cases[] = {
      {{32, 8, 128, 16, KvDtype::f16}, 2ull * 32 * 8 * 128 * 2 * 16},  // Llama-3-8B: 128 KiB/token
      {{32, 8, 128, 16, KvDtype::f32}, 2ull * 32 * 8 * 128 * 4 * 16},
      {{32, 32, 128, 8, KvDtype::f16}, 2ull * 32 * 32 * 128 * 2 * 8},  // Llama-2-7B: 512 KiB/token
      {{2, 1, 4, 32, KvDtype::f32}, 2ull * 2 * 1 * 4 * 4 * 32},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.layout.bytes_per_block(), c.bytes_per_block);
    EXPECT_EQ(c.layout.bytes_per_token() * c.layout.block_size, c.bytes_per_block);
  }
  EXPECT_EQ((KvLayout{32, 8, 128}.bytes_per_token()), 131072u);
  KvLayout defaults{1, 1, 1};
  EXPECT_EQ(defaults.block_size, 16);
  EXPECT_EQ(defaults.dtype, KvDtype::f16);
}

TEST(KvLayout, BlocksForBudgetRoundsDownToWholeBlocks) {
  const KvLayout l{32, 8, 128};  // 2 MiB per block
  const std::size_t b = l.bytes_per_block();
  ASSERT_EQ(b, 2u << 20);
  EXPECT_EQ(blocks_for_budget(l, 0), 0);
  EXPECT_EQ(blocks_for_budget(l, b - 1), 0);
  EXPECT_EQ(blocks_for_budget(l, b), 1);
  EXPECT_EQ(blocks_for_budget(l, 10 * b + b - 1), 10);
  EXPECT_EQ(blocks_for_budget(l, 20ull << 30), 10240);  // 20 GiB
  KvLayout f32 = l;
  f32.dtype = KvDtype::f32;
  EXPECT_EQ(blocks_for_budget(f32, 20ull << 30), 5120);
  KvLayout tiny{1, 1, 1, 32, KvDtype::f16};  // 128 bytes per block: capped so slots fit in an int
  EXPECT_EQ(blocks_for_budget(tiny, SIZE_MAX), INT32_MAX / 32);
}

TEST(KvLayout, BlockSizes8_16_32WorkOthersAreRejectedNamingBlockSize) {
  for (int bs : {8, 16, 32}) {
    KvLayout l{2, 2, 4, bs, KvDtype::f32};
    EXPECT_NO_THROW(l.validate());
    KvCacheManager m(4, bs);
    m.add_sequence(1);
    auto r = m.append(1, bs + 1);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->slots.back(), 1 * bs);  // the (bs+1)th token opens the second block
    KvStorage s(l, 4);
    EXPECT_EQ(s.num_slots(), 4 * bs);
  }
  for (int bs : {0, -16, 1, 4, 12, 24, 64}) {
    const std::string want = "block_size " + std::to_string(bs);
    KvLayout l{2, 2, 4, bs};
    EXPECT_THROW(l.validate(), mo::UsageError);
    EXPECT_THROW(KvCacheManager(4, bs), mo::UsageError);
    EXPECT_THROW(KvStorage(l, 4), mo::UsageError);
    EXPECT_THROW(blocks_for_budget(l, 1 << 20), mo::UsageError);
    EXPECT_NE(error_of([&] { KvCacheManager(4, bs); }).find(want), std::string::npos) << bs;
    EXPECT_NE(error_of([&] { l.validate(); }).find("use 8, 16 or 32"), std::string::npos);
  }
}

TEST(KvLayout, NonPositiveShapeIsRejectedNamingTheField) {
  EXPECT_NE(error_of([] { KvLayout{0, 8, 128}.validate(); }).find("num_layers"), std::string::npos);
  EXPECT_NE(error_of([] { KvLayout{32, 0, 128}.validate(); }).find("num_kv_heads"), std::string::npos);
  EXPECT_NE(error_of([] { KvLayout{32, 8, -1}.validate(); }).find("head_dim"), std::string::npos);
  EXPECT_THROW(blocks_for_budget(KvLayout{32, 0, 128}, 1 << 30), mo::UsageError);
  EXPECT_NE(error_of([] { KvLayout{1 << 30, 1 << 30, 1 << 30}.validate(); }).find("overflows"), std::string::npos);
}

// ---- hash ----

TEST(KvHash, KeysEqualPrefixesEquallyAndDifferentOnesDifferently) {
  using mo::engine::hash_block_tokens;
  using mo::engine::kKvRootHash;
  const std::vector<std::int32_t> a{1, 2, 3, 4}, a2{1, 2, 3, 4}, swapped{2, 1, 3, 4}, other{1, 2, 3, 5}, shorter{1, 2, 3};
  const std::uint64_t h = hash_block_tokens(kKvRootHash, a);
  EXPECT_EQ(h, hash_block_tokens(kKvRootHash, a2));
  EXPECT_NE(h, hash_block_tokens(kKvRootHash, swapped));
  EXPECT_NE(h, hash_block_tokens(kKvRootHash, other));
  EXPECT_NE(h, hash_block_tokens(kKvRootHash, shorter));
  // The same tokens after a different prefix are a different block.
  EXPECT_NE(hash_block_tokens(h, a), hash_block_tokens(hash_block_tokens(kKvRootHash, other), a));
  EXPECT_NE(hash_block_tokens(kKvRootHash, std::vector<std::int32_t>{0}), hash_block_tokens(kKvRootHash, {}));
  // No collisions over many small single-token blocks.
  std::vector<std::uint64_t> seen;
  for (std::int32_t t = -500; t < 5000; ++t) seen.push_back(hash_block_tokens(h, std::vector<std::int32_t>{t}));
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
}

// ---- block pool ----

TEST(KvBlockPool, AllocatesEveryBlockOnceThenReportsNoRoom) {
  BlockPool p(3);
  EXPECT_EQ(p.num_total(), 3);
  EXPECT_EQ(p.num_free(), 3);
  std::vector<int> got;
  for (int i = 0; i < 3; ++i) {
    auto b = p.allocate();
    ASSERT_TRUE(b);
    EXPECT_EQ(p.ref_count(*b), 1);
    got.push_back(*b);
  }
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(p.num_free(), 0);
  EXPECT_EQ(p.allocate(), std::nullopt);  // an expected miss, not an exception
  p.release(1);
  EXPECT_EQ(p.num_free(), 1);
  EXPECT_EQ(p.allocate(), 1);
  EXPECT_EQ(BlockPool(0).allocate(), std::nullopt);
}

TEST(KvBlockPool, RefCountsReturnABlockOnlyWhenTheLastHolderReleases) {
  BlockPool p(2);
  const int b = *p.allocate();
  p.retain(b);
  p.retain(b);
  EXPECT_EQ(p.ref_count(b), 3);
  p.release(b);
  p.release(b);
  EXPECT_EQ(p.num_free(), 1);
  p.release(b);
  EXPECT_EQ(p.ref_count(b), 0);
  EXPECT_EQ(p.num_free(), 2);
}

TEST(KvBlockPool, FreedBlocksAreReusedOldestFirst) {
  BlockPool p(4);
  for (int i = 0; i < 4; ++i) p.allocate();
  for (int b : {2, 0, 3}) p.release(b);
  EXPECT_EQ(p.allocate(), 2);
  EXPECT_EQ(p.allocate(), 0);
  p.release(1);
  EXPECT_EQ(p.allocate(), 3);
  EXPECT_EQ(p.allocate(), 1);
}

TEST(KvBlockPool, MisuseIsABugThatThrows) {
  BlockPool p(2);
  const int b = *p.allocate();
  p.release(b);
  EXPECT_NE(error_of([&] { p.release(b); }).find("double free"), std::string::npos);
  EXPECT_NE(error_of([&] { p.retain(1); }).find("block 1 is free"), std::string::npos);
  EXPECT_NE(error_of([&] { p.release(2); }).find("block id 2 is out of range"), std::string::npos);
  EXPECT_THROW(p.ref_count(-1), mo::Error);
  EXPECT_THROW(BlockPool(-1), mo::Error);
  EXPECT_EQ(p.num_free(), 2);  // failed calls changed nothing
}

TEST(KvBlockPool, HashMetadataNeedsAFullBlockAndIsResetOnReallocation) {
  BlockPool p(1);
  const int b = *p.allocate();
  EXPECT_FALSE(p.meta(b).full);
  EXPECT_THROW(p.set_hash(b, 42), mo::Error);  // only full blocks are keyed
  p.mark_full(b);
  p.set_hash(b, 42);
  EXPECT_EQ(p.meta(b).hash, 42u);
  p.release(b);
  EXPECT_EQ(p.meta(b).hash, 42u);  // kept while free, for a prefix cache to find
  EXPECT_EQ(p.allocate(), b);
  EXPECT_FALSE(p.meta(b).full);
  EXPECT_FALSE(p.meta(b).hash.has_value());
}

// ---- manager ----

TEST(KvCacheManager, AppendsFillBlocksInOrderAndCrossBoundaries) {
  // One sequence, block_size 8: each row is one append and the state after it.
  struct Step {
    int n;
    std::vector<int> slots;
    std::vector<int> table;
    int free_after;
  };
  const Step steps[] = {
      {3, {0, 1, 2}, {0}, 9},
      {5, {3, 4, 5, 6, 7}, {0}, 9},  // exactly fills block 0: no spare block taken
      {1, {8}, {0, 1}, 8},
      {0, {}, {0, 1}, 8},
      {17, iota(9, 15 + 2), {0, 1, 2, 3}, 6},  // crosses two boundaries
      {7, iota(26, 6 + 1), {0, 1, 2, 3, 4}, 5},
  };
  KvCacheManager m(10, 8);
  m.add_sequence(7);
  int tokens = 0;
  for (const auto& s : steps) {
    SCOPED_TRACE("append " + std::to_string(s.n) + " after " + std::to_string(tokens));
    EXPECT_EQ(m.blocks_needed(7, s.n), static_cast<int>(s.table.size() - table(m, 7).size()));
    auto r = m.append(7, s.n);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->start_pos, tokens);
    EXPECT_EQ(r->slots, s.slots);
    EXPECT_TRUE(r->copies.empty());
    tokens += s.n;
    EXPECT_EQ(m.num_tokens(7), tokens);
    EXPECT_EQ(table(m, 7), s.table);
    EXPECT_EQ(m.num_free_blocks(), s.free_after);
  }
  // Full blocks are marked for prefix caching; the partial last one is not.
  for (int b : {0, 1, 2}) EXPECT_TRUE(m.pool().meta(b).full) << b;
  EXPECT_FALSE(m.pool().meta(4).full);
  m.free(7);
  EXPECT_EQ(m.num_free_blocks(), 10);
  EXPECT_FALSE(m.contains(7));
}

TEST(KvCacheManager, BlocksNeededAtExactBlockBoundaries) {
  struct Case {
    int have;
    int n;
    int needed;
  };
  const Case cases[] = {{0, 0, 0}, {0, 1, 1}, {0, 16, 1}, {0, 17, 2}, {16, 1, 1}, {15, 1, 0}, {15, 2, 1}, {16, 16, 1}, {1, 47, 2}};
  for (const auto& c : cases) {
    KvCacheManager m(8, 16);
    m.add_sequence(1);
    ASSERT_TRUE(m.append(1, c.have));
    EXPECT_EQ(m.blocks_needed(1, c.n), c.needed) << c.have << " + " << c.n;
    const int free_before = m.num_free_blocks();
    ASSERT_TRUE(m.append(1, c.n));
    EXPECT_EQ(free_before - m.num_free_blocks(), c.needed);
    EXPECT_EQ(static_cast<int>(m.block_table(1).size()), (c.have + c.n + 15) / 16);
  }
}

struct Snapshot {
  int num_free;
  std::map<std::int64_t, std::pair<std::vector<int>, int>> seqs;
  std::vector<int> refs;
  bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(const KvCacheManager& m, const std::vector<std::int64_t>& ids) {
  Snapshot s{m.num_free_blocks(), {}, {}};
  for (auto id : ids) s.seqs[id] = {table(m, id), m.num_tokens(id)};
  for (int b = 0; b < m.num_total_blocks(); ++b) s.refs.push_back(m.pool().ref_count(b));
  return s;
}

TEST(KvCacheManager, OutOfBlocksReturnsNulloptAndChangesNothing) {
  KvCacheManager m(4, 8);
  m.add_sequence(1);
  m.add_sequence(2);
  ASSERT_TRUE(m.append(1, 20));  // 3 blocks
  ASSERT_TRUE(m.append(2, 3));   // the last block
  const Snapshot before = snapshot(m, {1, 2});
  EXPECT_EQ(m.blocks_needed(2, 9), 1);  // 3 + 9 = 12 tokens: one more block, none free
  EXPECT_FALSE(m.can_append(2, 9));
  EXPECT_EQ(m.append(2, 9), std::nullopt);
  EXPECT_EQ(m.append(1, 100), std::nullopt);
  EXPECT_EQ(snapshot(m, {1, 2}), before);
  // What still fits in the partial blocks does succeed.
  EXPECT_TRUE(m.can_append(2, 5));
  ASSERT_TRUE(m.append(2, 5));
  EXPECT_EQ(m.num_tokens(2), 8);
}

TEST(KvCacheManager, CopyOnWriteThatCannotGetABlockChangesNothing) {
  KvCacheManager m(2, 8);
  m.add_sequence(1);
  ASSERT_TRUE(m.append(1, 10));  // blocks [0, 1], block 1 holds 2 tokens
  m.fork(1, 2);
  const Snapshot before = snapshot(m, {1, 2});
  EXPECT_EQ(m.blocks_needed(2, 1), 1);  // the private copy of block 1
  EXPECT_EQ(m.append(2, 1), std::nullopt);
  EXPECT_EQ(m.append(1, 1), std::nullopt);
  EXPECT_EQ(snapshot(m, {1, 2}), before);
  m.free(1);  // now sequence 2 is block 1's only holder: appends go in place
  EXPECT_EQ(m.blocks_needed(2, 6), 0);
  auto r = m.append(2, 6);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->copies.empty());
  EXPECT_EQ(r->slots, iota(10, 6));
}

TEST(KvCacheManager, ForkSharesThePrefixAndCopiesOnWriteToTheSharedPartialBlock) {
  KvCacheManager m(8, 8);
  m.add_sequence(1);
  ASSERT_TRUE(m.append(1, 10));  // blocks [0, 1]; block 1 holds 2 tokens
  m.fork(1, 2);
  EXPECT_EQ(table(m, 2), table(m, 1));
  EXPECT_EQ(m.num_tokens(2), 10);
  EXPECT_EQ(m.pool().ref_count(0), 2);
  EXPECT_EQ(m.pool().ref_count(1), 2);
  EXPECT_EQ(m.num_free_blocks(), 6);  // forking takes no block

  EXPECT_EQ(m.blocks_needed(2, 1), 1);
  auto r = m.append(2, 1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->copies, (std::vector<BlockCopy>{{1, 2}}));  // child gets a private copy of block 1
  EXPECT_EQ(r->slots, std::vector<int>{2 * 8 + 2});
  EXPECT_EQ(table(m, 2), (std::vector<int>{0, 2}));
  EXPECT_EQ(table(m, 1), (std::vector<int>{0, 1}));
  EXPECT_EQ(m.pool().ref_count(0), 2);  // the full prefix block stays shared
  EXPECT_EQ(m.pool().ref_count(1), 1);
  EXPECT_EQ(m.pool().ref_count(2), 1);

  // The parent is block 1's only holder now, so it appends in place.
  r = m.append(1, 1);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->copies.empty());
  EXPECT_EQ(r->slots, std::vector<int>{1 * 8 + 2});

  m.free(1);
  EXPECT_EQ(m.pool().ref_count(0), 1);
  EXPECT_EQ(m.pool().ref_count(1), 0);
  m.free(2);
  EXPECT_EQ(m.num_free_blocks(), m.num_total_blocks());
}

TEST(KvCacheManager, ForkAtABlockBoundaryNeedsNoCopy) {
  KvCacheManager m(8, 16);
  m.add_sequence(1);
  ASSERT_TRUE(m.append(1, 32));
  m.fork(1, 2);
  m.fork(2, 3);
  EXPECT_EQ(m.pool().ref_count(1), 3);
  auto r = m.append(3, 5);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->copies.empty());
  EXPECT_EQ(table(m, 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(r->slots, iota(32, 5));
  // An empty append never copies, even onto a shared partial block.
  ASSERT_TRUE(m.append(1, 0));
  m.fork(3, 4);
  r = m.append(4, 0);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->copies.empty());
  EXPECT_EQ(m.num_sequences(), 4);
}

TEST(KvCacheManager, BadSequenceIdsAreBugsThatThrow) {
  KvCacheManager m(4, 16);
  m.add_sequence(1);
  EXPECT_NE(error_of([&] { m.add_sequence(1); }).find("sequence 1 already exists"), std::string::npos);
  EXPECT_NE(error_of([&] { m.append(9, 1); }).find("no sequence with id 9"), std::string::npos);
  EXPECT_THROW(m.num_tokens(9), mo::Error);
  EXPECT_THROW(m.block_table(9), mo::Error);
  EXPECT_THROW(m.free(9), mo::Error);
  EXPECT_THROW(m.fork(9, 10), mo::Error);
  EXPECT_THROW(m.fork(1, 1), mo::Error);
  EXPECT_THROW(m.append(1, -1), mo::Error);
  EXPECT_THROW(m.blocks_needed(1, INT32_MAX), mo::Error);
  EXPECT_EQ(m.num_free_blocks(), 4);
  EXPECT_EQ(m.num_sequences(), 1);
}

// Random add/append/fork/free against a shadow of the cache contents: after every step each sequence
// must read back exactly the tokens it appended (so copy-on-write happened whenever needed and no two
// sequences write one slot), ref counts must equal the number of tables holding each block, and the
// free count the number of blocks no table holds. At the end, freeing everything leaks nothing.
TEST(KvCacheManager, RandomOperationsKeepRefCountsExactAndLeakNothing) {
  for (int bs : {8, 16, 32}) {
    SCOPED_TRACE("block_size " + std::to_string(bs));
    const int num_blocks = 48;
    KvCacheManager m(num_blocks, bs);
    std::mt19937 rng(1234 + bs);
    std::vector<std::int64_t> cells(static_cast<std::size_t>(num_blocks) * bs, -1);  // token value per slot
    std::map<std::int64_t, std::vector<std::int64_t>> expect;                        // seq -> its token values
    std::int64_t next_id = 100, next_value = 0;
    int misses = 0, copies = 0, forks = 0;
    auto pick = [&] {
      auto it = expect.begin();
      std::advance(it, std::uniform_int_distribution<int>(0, static_cast<int>(expect.size()) - 1)(rng));
      return it->first;
    };
    for (int step = 0; step < 4000; ++step) {
      const int op = std::uniform_int_distribution<int>(0, 9)(rng);
      if (expect.empty() || (op == 0 && expect.size() < 12)) {
        m.add_sequence(next_id);
        expect[next_id++] = {};
      } else if (op <= 5) {
        const std::int64_t id = pick();
        const int n = op == 1 ? 1 : std::uniform_int_distribution<int>(0, 2 * bs + 3)(rng);
        const int needed = m.blocks_needed(id, n);
        const Snapshot before = snapshot(m, {id});
        auto r = m.append(id, n);
        ASSERT_EQ(r.has_value(), needed <= before.num_free);
        if (!r) {
          ++misses;
          ASSERT_EQ(snapshot(m, {id}), before);
          continue;
        }
        ASSERT_EQ(before.num_free - m.num_free_blocks(), needed);
        ASSERT_EQ(static_cast<int>(r->slots.size()), n);
        for (const auto& c : r->copies) {
          ++copies;
          std::copy_n(cells.begin() + c.src_block * bs, bs, cells.begin() + c.dst_block * bs);
        }
        for (int slot : r->slots) {
          cells[slot] = next_value;
          expect[id].push_back(next_value++);
        }
      } else if (op <= 7 && expect.size() < 16) {
        const std::int64_t parent = pick();
        m.fork(parent, next_id);
        expect[next_id++] = expect[parent];
        ++forks;
      } else {
        const std::int64_t id = pick();
        m.free(id);
        expect.erase(id);
      }

      std::vector<int> holders(num_blocks, 0);
      for (const auto& [id, values] : expect) {
        const std::vector<int> t = table(m, id);
        ASSERT_EQ(m.num_tokens(id), static_cast<int>(values.size()));
        ASSERT_EQ(static_cast<int>(t.size()), (static_cast<int>(values.size()) + bs - 1) / bs);
        for (std::size_t i = 0; i < values.size(); ++i)
          ASSERT_EQ(cells[t[i / bs] * bs + i % bs], values[i]) << "step " << step << " seq " << id << " token " << i;
        for (std::size_t j = 0; j < t.size(); ++j) {
          ++holders[t[j]];
          ASSERT_EQ(m.pool().meta(t[j]).full, (j + 1) * bs <= values.size()) << "block " << t[j];
        }
      }
      int unheld = 0;
      for (int b = 0; b < num_blocks; ++b) {
        ASSERT_EQ(m.pool().ref_count(b), holders[b]) << "step " << step << " block " << b;
        unheld += holders[b] == 0;
      }
      ASSERT_EQ(m.num_free_blocks(), unheld) << "step " << step;
    }
    // The walk must have exercised the interesting paths, not just appends into an empty pool.
    EXPECT_GT(misses, 20);
    EXPECT_GT(copies, 20);
    EXPECT_GT(forks, 200);
    for (const auto& [id, values] : expect) m.free(id);
    EXPECT_EQ(m.num_sequences(), 0);
    EXPECT_EQ(m.num_free_blocks(), m.num_total_blocks());
  }
}

// ---- storage ----

std::vector<float> random_rows(int n, std::size_t row, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  std::vector<float> v(n * row);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(KvStorage, F32WriteReadRoundTripIsExactAndTouchesOnlyTheGivenSlots) {
  const KvLayout l{3, 2, 4, 8, KvDtype::f32};
  KvStorage s(l, 5);
  EXPECT_EQ(s.bytes(), 5 * l.bytes_per_block());
  const std::vector<int> slots{5, 17, 0, 39};
  const auto k = random_rows(4, 8, 1), v = random_rows(4, 8, 2);
  s.write(1, slots, k.data(), v.data());
  std::vector<float> k2(k.size()), v2(v.size());
  s.read(1, slots, k2.data(), v2.data());
  EXPECT_EQ(k2, k);
  EXPECT_EQ(v2, v);
  s.read(0, slots, k2.data(), v2.data());  // other layers untouched
  EXPECT_EQ(k2, std::vector<float>(k.size(), 0.f));
  std::vector<float> one(8);
  s.read(1, std::vector<int>{6}, one.data(), one.data());
  EXPECT_EQ(one, std::vector<float>(8, 0.f));
}

TEST(KvStorage, F16RoundTripIsWithinHalfRounding) {
  const KvLayout l{2, 4, 16, 16, KvDtype::f16};
  KvStorage s(l, 3);
  EXPECT_EQ(s.bytes(), 3u * 2 * 2 * 16 * 4 * 16 * 2);
  const std::vector<int> slots{47, 3, 16};
  auto k = random_rows(3, 64, 3), v = random_rows(3, 64, 4);
  k[0] = 0.f;
  k[1] = 65504.f;  // largest half
  k[2] = 1e-6f;    // half subnormal
  s.write(1, slots, k.data(), v.data());
  std::vector<float> k2(k.size()), v2(v.size());
  s.read(1, slots, k2.data(), v2.data());
  for (std::size_t i = 0; i < k.size(); ++i) {
    // Bit-exact with the reference conversion, and within half an f16 ulp (2^-11 relative) of the input.
    EXPECT_EQ(k2[i], mo::f16_to_f32(mo::f32_to_f16(k[i]))) << i;
    EXPECT_EQ(v2[i], mo::f16_to_f32(mo::f32_to_f16(v[i]))) << i;
    EXPECT_LE(std::fabs(v2[i] - v[i]), std::fabs(v[i]) * 0x1p-11f) << i;
  }
}

TEST(KvStorage, BlockPointersFollowTheDocumentedLayout) {
  for (KvDtype dt : {KvDtype::f32, KvDtype::f16}) {
    const KvLayout l{2, 3, 4, 8, dt};
    KvStorage s(l, 4);
    const int block = 2, offset = 5, head = 1, dim = 3;
    std::vector<float> k(12, 0.f), v(12, 0.f);
    k[head * 4 + dim] = 1.5f;
    v[head * 4 + dim] = -2.5f;
    s.write(1, std::vector<int>{block * 8 + offset}, k.data(), v.data());
    const std::size_t at = (static_cast<std::size_t>(offset) * 3 + head) * 4 + dim;  // [block_size, heads, head_dim]
    if (dt == KvDtype::f32) {
      EXPECT_EQ(s.k_block<float>(1, block)[at], 1.5f);
      EXPECT_EQ(s.v_block<float>(1, block)[at], -2.5f);
      EXPECT_EQ(s.k_block<float>(1, 0)[block * 8 * 12 + at], 1.5f);  // the layer as one slot-indexed array
      EXPECT_EQ(s.k_block<float>(0, block)[at], 0.f);
      EXPECT_NE(error_of([&] { s.k_block<std::uint16_t>(0, 0); }).find("holds f32"), std::string::npos);
    } else {
      EXPECT_EQ(mo::f16_to_f32(s.k_block<std::uint16_t>(1, block)[at]), 1.5f);
      EXPECT_EQ(mo::f16_to_f32(s.v_block<std::uint16_t>(1, block)[at]), -2.5f);
      EXPECT_THROW(s.v_block<float>(1, block), mo::Error);
    }
    EXPECT_THROW(s.k_block<float>(2, 0), mo::Error);
  }
}

TEST(KvStorage, BadSlotsAndLayersThrowAndWriteNothing) {
  KvStorage s(KvLayout{1, 1, 2, 8, KvDtype::f32}, 2);
  const std::vector<float> k{1, 2, 3, 4}, v{5, 6, 7, 8};
  EXPECT_NE(error_of([&] {
              s.write(0, std::vector<int>{0, 16}, k.data(), v.data());
            }).find("slot 16 is out of range [0, 16)"),
            std::string::npos);
  std::vector<float> out(2, -1.f);
  s.read(0, std::vector<int>{0}, out.data(), out.data());
  EXPECT_EQ(out, std::vector<float>(2, 0.f));  // slot 0 was not written either
  EXPECT_THROW(s.write(1, std::vector<int>{0}, k.data(), v.data()), mo::Error);
  EXPECT_THROW(s.read(0, std::vector<int>{-1}, out.data(), out.data()), mo::Error);
  EXPECT_THROW(s.copy_block(0, 2), mo::Error);
}

TEST(KvStorage, AllocationFailureNamesTheBytes) {
  // 256 GiB per block: 4000 blocks (~1 PiB) exceed any address space, so calloc fails.
  const KvLayout huge{1 << 10, 1 << 10, 1 << 10, 32, KvDtype::f32};
  const std::string msg = error_of([&] { KvStorage(huge, 4000); });
  EXPECT_NE(msg.find("cannot allocate 1099511627776000 bytes"), std::string::npos) << msg;
  const KvLayout huger{1 << 20, 1 << 20, 1 << 10, 32, KvDtype::f32};  // 2^58 bytes per block
  EXPECT_NE(error_of([&] { KvStorage(huger, 64); }).find("64 blocks of 288230376151711744 bytes overflow"), std::string::npos);
  EXPECT_THROW(KvStorage(KvLayout{1, 1, 1}, -1), mo::Error);
  EXPECT_EQ(KvStorage(KvLayout{1, 1, 1}, 0).bytes(), 0u);
}

// The engine's side of copy-on-write: apply the copies, then write; the parent's data is untouched and the
// child still sees the shared prefix.
TEST(KvStorage, CopyOnWriteKeepsTheParentAndTheChildPrefix) {
  const KvLayout l{2, 1, 2, 8, KvDtype::f32};
  KvStorage store(l, 4);
  KvCacheManager m(4, 8);
  m.add_sequence(1);
  auto r = m.append(1, 10);
  const auto pk = random_rows(10, 2, 5), pv = random_rows(10, 2, 6);
  for (int layer = 0; layer < 2; ++layer) store.write(layer, r->slots, pk.data(), pv.data());
  m.fork(1, 2);
  r = m.append(2, 1);
  ASSERT_EQ(r->copies.size(), 1u);
  for (const auto& c : r->copies) store.copy_block(c.src_block, c.dst_block);
  const std::vector<float> ck{9, 9}, cv{-9, -9};
  for (int layer = 0; layer < 2; ++layer) store.write(layer, r->slots, ck.data(), cv.data());

  auto read_seq = [&](std::int64_t id, int layer) {
    std::vector<int> slots;
    for (int i = 0; i < m.num_tokens(id); ++i) slots.push_back(m.block_table(id)[i / 8] * 8 + i % 8);
    std::vector<float> k(slots.size() * 2), v(slots.size() * 2);
    store.read(layer, slots, k.data(), v.data());
    return std::pair{k, v};
  };
  for (int layer = 0; layer < 2; ++layer) {
    EXPECT_EQ(read_seq(1, layer), std::pair(pk, pv));
    auto want_k = pk, want_v = pv;
    want_k.insert(want_k.end(), ck.begin(), ck.end());
    want_v.insert(want_v.end(), cv.begin(), cv.end());
    EXPECT_EQ(read_seq(2, layer), std::pair(want_k, want_v));
  }
}

}  // namespace
