#pragma once
// Continuous batching over a paged KV cache (vLLM v1's scheduler, simplified). Each step takes, within
// max_num_batched_tokens and max_num_seqs:
//   1. every running sequence's pending tokens (one decode token, or the next prefill chunk), oldest
//      first; when the pool runs out of blocks the newest running sequence is preempted (its blocks
//      freed, its tokens recomputed later from the front of the waiting queue);
//   2. then, if nothing was preempted, waiting sequences in arrival order, each starting from the
//      longest run of its full prompt blocks already in the prefix cache.
// Host bookkeeping only: the caller runs the model on the plan, then commit()s it (before the next
// schedule()) and appends the sampled tokens. Blocks, block tables and the prefix cache are the
// KvCacheManager's; the scheduler keeps only what to compute next. A request moves WAITING -> RUNNING -> (PREEMPTED -> WAITING) ->
// FINISHED.
#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "mo/engine/kv_cache.h"

namespace mo::serve {

struct SchedulerConfig {
  int num_blocks = 0;                  // blocks in the KV pool
  int block_size = 16;                 // tokens per block
  int max_num_seqs = 256;              // running sequences at most
  int max_num_batched_tokens = 2048;   // tokens in one step at most
  bool enable_chunked_prefill = true;  // a prompt may be split over steps
  bool enable_prefix_caching = true;   // reuse full blocks of equal prefixes
};

// One sequence's share of a step: tokens [start_pos, start_pos + num_tokens) of it.
struct ScheduledChunk {
  std::int64_t seq_id = 0;
  int start_pos = 0;
  int num_tokens = 0;
  std::vector<int> slots;  // [num_tokens] KV slot of each token
  bool samples = false;    // the chunk ends at the last known token: sample the next one from it
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;   // running sequences first, then newly admitted ones
  std::vector<std::int64_t> preempted;  // sequences sent back to waiting during this step
  int num_tokens = 0;                   // tokens in all chunks
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& cfg);

  // A new request at the back of the waiting queue. `use_prefix_cache` false: compute every token (the
  // caller needs logits for the whole prompt).
  void add(std::int64_t seq_id, std::vector<std::int32_t> prompt, bool use_prefix_cache = true);
  StepPlan schedule();
  // After the model ran `plan`: its tokens are in the cache; full blocks join the prefix cache.
  void commit(const StepPlan& plan);
  // A sampled token joins a running sequence (computed in a later step).
  void append_token(std::int64_t seq_id, std::int32_t token);
  // Ends a sequence (finished or aborted, waiting or running) and frees its blocks at once.
  void finish(std::int64_t seq_id);

  bool contains(std::int64_t seq_id) const { return seqs_.contains(seq_id); }
  std::span<const std::int32_t> tokens(std::int64_t seq_id) const;
  std::span<const int> block_table(std::int64_t seq_id) const;
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  std::span<const std::int64_t> running() const { return running_; }
  int num_blocks_used() const { return kv_.num_used_blocks(); }
  int num_blocks_free() const { return kv_.num_free_blocks(); }
  int num_preemptions() const { return num_preemptions_; }
  // Prompt tokens looked up in the prefix cache on admission, and the hits.
  const engine::PrefixCacheStats& prefix_cache_stats() const { return kv_.prefix_cache_stats(); }
  const SchedulerConfig& config() const { return cfg_; }

 private:
  struct Seq {
    std::vector<std::int32_t> tokens;  // prompt, then output so far
    int num_computed = 0;              // tokens whose K and V are in the cache
    bool use_prefix_cache = true;
  };
  Seq& seq(std::int64_t seq_id);
  const Seq& seq(std::int64_t seq_id) const;
  // Reserves slots for the next n tokens of seq_id (all or nothing).
  bool allocate_slots(std::int64_t seq_id, int n, std::vector<int>& slots);
  // Gives seq_id's blocks back; its tokens will be computed again from the start.
  void free_blocks(std::int64_t seq_id);
  void preempt_newest();

  SchedulerConfig cfg_;
  engine::KvCacheManager kv_;  // a sequence is in it while it holds blocks (running)
  std::unordered_map<std::int64_t, Seq> seqs_;
  std::vector<std::int64_t> running_;  // admission order: oldest first
  std::deque<std::int64_t> waiting_;   // preempted ones go to the front
  int num_preemptions_ = 0;
};

}  // namespace mo::serve
