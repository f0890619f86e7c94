// Scheduler tests as tables of what runs at each step, with a fake engine: no model, every sampled token
// is 7, a request finishes after its max_output tokens. A step is written "A[0,4)* B[4,5)": sequence A
// computes positions 0..3 and samples (*), B computes position 4 without sampling; "| preempt B" lists
// the sequences preempted in that step.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "mo/serve/scheduler.h"

namespace {

using mo::serve::Scheduler;
using mo::serve::SchedulerConfig;

struct FakeRequest {
  char name;
  std::vector<std::int32_t> prompt;
  int max_output;
};

std::vector<std::int32_t> tokens(int n, int first = 100) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

class FakeEngine {
 public:
  explicit FakeEngine(const SchedulerConfig& cfg) : sched(cfg) {}
  void add(const FakeRequest& r) {
    sched.add(r.name, r.prompt);
    max_output[r.name] = r.max_output;
  }
  // One step: what ran, as a table row.
  std::string step() {
    auto plan = sched.schedule();
    std::string row;
    for (const auto& c : plan.chunks)
      row += fmt::format("{}{}[{},{}){}", row.empty() ? "" : " ", static_cast<char>(c.seq_id), c.start_pos, c.start_pos + c.num_tokens,
                         c.samples ? "*" : "");
    if (!plan.preempted.empty()) {
      row += " | preempt";
      for (auto id : plan.preempted) row += fmt::format(" {}", static_cast<char>(id));
    }
    sched.commit(plan);
    for (const auto& c : plan.chunks) {
      if (!c.samples) continue;
      if (++outputs[c.seq_id] >= max_output[c.seq_id])
        sched.finish(c.seq_id);
      else
        sched.append_token(c.seq_id, 7);
    }
    return row;
  }
  std::vector<std::string> run(int steps) {
    std::vector<std::string> rows;
    for (int i = 0; i < steps; ++i) rows.push_back(step());
    return rows;
  }
  Scheduler sched;
  std::map<std::int64_t, int> max_output, outputs;
};

SchedulerConfig config(int num_blocks, int block_size, int max_seqs, int max_tokens, bool prefix_caching = false) {
  return {.num_blocks = num_blocks,
          .block_size = block_size,
          .max_num_seqs = max_seqs,
          .max_num_batched_tokens = max_tokens,
          .enable_chunked_prefill = true,
          .enable_prefix_caching = prefix_caching};
}

TEST(ServeScheduler, FinishedSequenceHandsItsSlotToTheNextWaitingOne) {
  FakeEngine e(config(64, 8, 2, 64));
  e.add({'A', tokens(4), 2});
  e.add({'B', tokens(4), 3});
  e.add({'C', tokens(4), 1});
  const std::vector<std::string> expected = {
      "A[0,4)* B[0,4)*",  // max_num_seqs 2: C waits
      "A[4,5)* B[4,5)*",  // A's second token ends it
      "B[5,6)* C[0,4)*",  // C takes A's slot in the same step as B's decode
      "",
  };
  EXPECT_EQ(e.run(4), expected);
  EXPECT_EQ(e.sched.num_blocks_used(), 0);
}

TEST(ServeScheduler, LongPromptIsChunkedWithinTheTokenBudget) {
  FakeEngine e(config(64, 8, 8, 6));
  e.add({'A', tokens(10), 2});
  e.add({'B', tokens(3), 1});
  const std::vector<std::string> expected = {
      "A[0,6)",           // 6 tokens per step: A's prompt is split
      "A[6,10)* B[0,2)",  // B's prefill starts in the leftover budget
      "A[10,11)* B[2,3)*",
      "",
  };
  EXPECT_EQ(e.run(4), expected);
}

TEST(ServeScheduler, NewestRunningSequenceIsPreemptedAndRecomputedLater) {
  // 3 blocks of 8: A holds 2, B holds 1; A's 17th token needs a block, so B (newest) gives its own up.
  FakeEngine e(config(3, 8, 8, 64));
  e.add({'A', tokens(16), 3});
  e.add({'B', tokens(4), 2});
  const std::vector<std::string> expected = {
      "A[0,16)* B[0,4)*",
      "A[16,17)* | preempt B",
      "A[17,18)*",  // A finishes: all three blocks free again
      "B[0,5)*",    // B recomputes its prompt and its first output token
      "",
  };
  EXPECT_EQ(e.run(5), expected);
  EXPECT_EQ(e.sched.num_preemptions(), 1);
  EXPECT_EQ(e.sched.num_blocks_used(), 0);
}

TEST(ServeScheduler, SequenceThatCannotGrowPreemptsItselfWhenItIsTheNewest) {
  // 2 blocks of 8: A's decode fits in its partly filled block, B's needs a second block that is not there.
  FakeEngine e(config(2, 8, 8, 64));
  e.add({'A', tokens(4), 3});
  e.add({'B', tokens(8), 2});
  const std::vector<std::string> expected = {
      "A[0,4)* B[0,8)*",
      "A[4,5)* | preempt B",
      "A[5,6)*",  // B needs 2 blocks, 1 is free: it keeps waiting
      "B[0,9)*",  // B's first output token was kept: recomputed with the prompt
      "",
  };
  EXPECT_EQ(e.run(5), expected);
}

TEST(ServeScheduler, MaxNumSeqsCapsTheBatch) {
  FakeEngine e(config(64, 8, 1, 64));
  e.add({'A', tokens(2), 2});
  e.add({'B', tokens(2), 1});
  const std::vector<std::string> expected = {"A[0,2)*", "A[2,3)*", "B[0,2)*", ""};
  EXPECT_EQ(e.run(4), expected);
}

TEST(ServeScheduler, SharedPromptPrefixIsComputedOnce) {
  FakeEngine e(config(16, 8, 8, 64, true));
  auto system = tokens(16);  // two full blocks
  auto a = system, b = system, c = system;
  a.push_back(1);
  b.insert(b.end(), {2, 3});
  c.push_back(4);
  e.add({'A', a, 1});
  EXPECT_EQ(e.step(), "A[0,17)*");
  e.add({'B', b, 1});
  EXPECT_EQ(e.step(), "B[16,18)*");  // B's first 16 tokens come from A's cached blocks
  EXPECT_EQ(e.sched.num_blocks_used(), 0);
  e.add({'C', c, 1});
  EXPECT_EQ(e.step(), "C[16,17)*");  // freed blocks keep their contents until reused
  EXPECT_EQ(e.sched.prefix_cache_stats().hit_tokens, 32);
  EXPECT_EQ(e.sched.prefix_cache_stats().queried_tokens, 17 + 18 + 17);
}

TEST(ServeScheduler, WithoutPrefixCachingEveryPromptIsComputed) {
  FakeEngine e(config(16, 8, 8, 64, false));
  e.add({'A', tokens(17), 1});
  EXPECT_EQ(e.step(), "A[0,17)*");
  e.add({'B', tokens(17), 1});
  EXPECT_EQ(e.step(), "B[0,17)*");
}

TEST(ServeScheduler, PromptFullyCachedStillComputesItsLastToken) {
  FakeEngine e(config(16, 8, 8, 64, true));
  e.add({'A', tokens(16), 1});
  EXPECT_EQ(e.step(), "A[0,16)*");
  e.add({'B', tokens(16), 1});
  EXPECT_EQ(e.step(), "B[8,16)*");  // block 2 is recomputed: its last token's logits give the output
}

TEST(ServeScheduler, EvictedPrefixBlockIsNotReused) {
  FakeEngine e(config(3, 8, 8, 64, true));
  e.add({'A', tokens(9), 1});
  EXPECT_EQ(e.step(), "A[0,9)*");
  e.add({'X', tokens(17, 500), 1});  // takes every block, overwriting A's cached one
  EXPECT_EQ(e.step(), "X[0,17)*");
  e.add({'B', tokens(9), 1});
  EXPECT_EQ(e.step(), "B[0,9)*");
}

TEST(ServeScheduler, PreemptingASequenceThatSharesAPrefixLeavesTheRunningOnesBlocks) {
  // 4 blocks of 8. A holds 3 (two of them the shared system prompt), B shares those two and holds 1 more;
  // A's 25th token needs a block, so B gives its own up, and A's prefix blocks stay A's.
  FakeEngine e(config(4, 8, 8, 64, true));
  const auto system = tokens(16);
  auto a = system, b = system;
  a.insert(a.end(), {1, 2, 3, 4, 5, 6, 7});  // 23 tokens: the first output is the 24th, in block 3
  b.push_back(9);
  e.add({'A', a, 4});
  EXPECT_EQ(e.step(), "A[0,23)*");
  const auto a_blocks = e.sched.block_table('A');
  const std::vector<int> a_prefix(a_blocks.begin(), a_blocks.begin() + 2);
  e.add({'B', b, 2});
  EXPECT_EQ(e.step(), "A[23,24)* B[16,17)*");  // B's system prompt comes from A's blocks
  EXPECT_EQ(std::vector<int>(e.sched.block_table('B').begin(), e.sched.block_table('B').begin() + 2), a_prefix);
  EXPECT_EQ(e.step(), "A[24,25)* | preempt B");
  EXPECT_EQ(std::vector<int>(e.sched.block_table('A').begin(), e.sched.block_table('A').begin() + 2), a_prefix);
  EXPECT_EQ(e.step(), "A[25,26)*");  // B would need a fourth block: it waits; A finishes
  EXPECT_EQ(e.step(), "B[16,18)*");  // B comes back to the cached system prompt
  EXPECT_EQ(e.step(), "");
  EXPECT_EQ(e.sched.num_blocks_used(), 0);
}

TEST(ServeScheduler, AbortFreesBlocksAtOnceAndLeavesTheQueue) {
  FakeEngine e(config(64, 8, 1, 64));
  e.add({'A', tokens(20), 100});
  e.add({'B', tokens(4), 1});
  EXPECT_EQ(e.step(), "A[0,20)*");
  EXPECT_EQ(e.sched.num_blocks_used(), 3);
  e.sched.finish('B');  // waiting
  e.sched.finish('A');  // running
  EXPECT_EQ(e.sched.num_blocks_used(), 0);
  EXPECT_FALSE(e.sched.has_work());
  EXPECT_EQ(e.step(), "");
}

}  // namespace
