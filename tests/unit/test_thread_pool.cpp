#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "mo/core/thread_pool.h"

namespace {

TEST(ThreadPool, CoversTheRangeExactlyOnce) {
  mo::ThreadPool pool(4);
  for (std::int64_t n : {0, 1, 3, 4, 5, 1000, 12345}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(0, n, [&](std::int64_t b, std::int64_t e, int) {
      for (std::int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << i;
  }
}

TEST(ThreadPool, ChunksAreDeterministicAndRespectGrain) {
  mo::ThreadPool pool(3);
  std::vector<std::pair<std::int64_t, std::int64_t>> seen(3);
  pool.parallel_for(10, 40, [&](std::int64_t b, std::int64_t e, int t) { seen[t] = {b, e}; });
  EXPECT_EQ(seen[0], (std::pair<std::int64_t, std::int64_t>{10, 20}));
  EXPECT_EQ(seen[2], (std::pair<std::int64_t, std::int64_t>{30, 40}));
  int calls = 0;
  pool.parallel_for(
      0, 10, [&](std::int64_t, std::int64_t, int) { ++calls; }, 100);  // one chunk: grain > n
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, RethrowsTheWorkersException) {
  mo::ThreadPool pool(4);
  EXPECT_THROW(pool.parallel_for(0, 100,
                                 [](std::int64_t b, std::int64_t, int) {
                                   if (b > 0) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  std::atomic<std::int64_t> sum{0};
  pool.parallel_for(0, 100, [&](std::int64_t b, std::int64_t e, int) {
    for (auto i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);  // still usable after an exception
}

// More threads than this machine has cores, many tiny jobs back to back: workers are often late, and
// the caller runs their chunks; every chunk must still run exactly once, with its own index.
TEST(ThreadPool, LateWorkersChunksRunOnceWithTheirIndex) {
  mo::ThreadPool pool(8);
  std::vector<std::atomic<int>> by_index(8);
  for (int job = 0; job < 20000; ++job) {
    for (auto& h : by_index) h = 0;
    const std::int64_t n = 1 + job % 11;
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(0, n, [&](std::int64_t b, std::int64_t e, int t) {
      by_index[t]++;
      for (std::int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "job " << job << " item " << i;
    for (int t = 0; t < 8; ++t) ASSERT_LE(by_index[t].load(), 1) << "job " << job << " index " << t;
  }
}

// A holder of the default pool keeps a working pool of its size after set_default_threads replaces it.
TEST(ThreadPool, DefaultPoolStaysWithItsHolderWhenReplaced) {
  mo::set_default_threads(2);
  const std::shared_ptr<mo::ThreadPool> held = mo::default_pool();
  mo::set_default_threads(3);
  EXPECT_NE(mo::default_pool(), held);
  EXPECT_EQ(mo::default_pool()->size(), 3);
  EXPECT_EQ(held->size(), 2);
  std::atomic<std::int64_t> sum{0};
  held->parallel_for(0, 100, [&](std::int64_t b, std::int64_t e, int) {
    for (auto i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
  mo::set_default_threads(0);
}

}  // namespace
