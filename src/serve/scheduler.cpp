#include "mo/serve/scheduler.h"

#include <fmt/format.h>

#include <algorithm>

#include "mo/core/error.h"
#include "mo/engine/kv_layout.h"

namespace mo::serve {

Scheduler::Scheduler(const SchedulerConfig& cfg) : cfg_(cfg), pool_(cfg.num_blocks), hash_of_block_(cfg.num_blocks) {
  engine::check_block_size(cfg.block_size);
  if (cfg.max_num_seqs < 1) throw UsageError(fmt::format("max_num_seqs: expected >= 1, got {}", cfg.max_num_seqs));
  if (cfg.max_num_batched_tokens < 1)
    throw UsageError(fmt::format("max_num_batched_tokens: expected >= 1, got {}", cfg.max_num_batched_tokens));
}

Scheduler::Seq& Scheduler::seq(std::int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) throw Error(fmt::format("scheduler: no sequence {}", seq_id));
  return it->second;
}

const Scheduler::Seq& Scheduler::seq(std::int64_t seq_id) const { return const_cast<Scheduler*>(this)->seq(seq_id); }

std::span<const std::int32_t> Scheduler::tokens(std::int64_t seq_id) const { return seq(seq_id).tokens; }
std::span<const int> Scheduler::block_table(std::int64_t seq_id) const { return seq(seq_id).blocks; }

void Scheduler::add(std::int64_t seq_id, std::vector<std::int32_t> prompt, bool use_prefix_cache) {
  if (prompt.empty()) throw Error(fmt::format("scheduler: sequence {} has an empty prompt", seq_id));
  Seq s;
  s.tokens = std::move(prompt);
  s.use_prefix_cache = use_prefix_cache && cfg_.enable_prefix_caching;
  if (!seqs_.try_emplace(seq_id, std::move(s)).second) throw Error(fmt::format("scheduler: sequence {} already exists", seq_id));
  waiting_.push_back(seq_id);
}

std::optional<int> Scheduler::allocate_block() {
  auto b = pool_.allocate();
  // The block's old contents are gone, so is its place in the prefix cache.
  if (b && hash_of_block_[*b]) {
    auto it = cached_.find(*hash_of_block_[*b]);
    if (it != cached_.end() && it->second == *b) cached_.erase(it);
    hash_of_block_[*b].reset();
  }
  return b;
}

bool Scheduler::allocate_slots(Seq& s, int n, std::vector<int>& slots) {
  const int bs = cfg_.block_size;
  const int need = (s.num_computed + n + bs - 1) / bs - static_cast<int>(s.blocks.size());
  if (need > pool_.num_free()) return false;
  for (int i = 0; i < need; ++i) s.blocks.push_back(*allocate_block());
  slots.clear();
  for (int p = s.num_computed; p < s.num_computed + n; ++p) slots.push_back(s.blocks[p / bs] * bs + p % bs);
  return true;
}

void Scheduler::free_blocks(Seq& s) {
  // Tail first, so the start of a prefix (the part most likely shared) stays on the free list longest.
  for (auto b = s.blocks.rbegin(); b != s.blocks.rend(); ++b) pool_.release(*b);
  s.blocks.clear();
  s.num_computed = 0;
}

void Scheduler::preempt_newest() {
  const std::int64_t victim = running_.back();
  running_.pop_back();
  free_blocks(seq(victim));
  waiting_.push_front(victim);
  ++num_preemptions_;
}

std::uint64_t Scheduler::block_hash(Seq& s, int i) {
  while (static_cast<int>(s.block_hashes.size()) <= i) {
    const int k = static_cast<int>(s.block_hashes.size());
    const std::uint64_t parent = k == 0 ? engine::kKvRootHash : s.block_hashes[k - 1];
    s.block_hashes.push_back(engine::hash_block_tokens(parent, std::span(s.tokens).subspan(k * cfg_.block_size, cfg_.block_size)));
  }
  return s.block_hashes[i];
}

void Scheduler::take_cached_prefix(Seq& s) {
  const int len = static_cast<int>(s.tokens.size());
  prefix_stats_.queried_tokens += len;
  // At least one token is left to compute: its logits give the first output token.
  const int max_blocks = (len - 1) / cfg_.block_size;
  for (int i = 0; i < max_blocks; ++i) {
    auto it = cached_.find(block_hash(s, i));
    if (it == cached_.end()) break;
    pool_.retain_cached(it->second);
    s.blocks.push_back(it->second);
  }
  s.num_computed = static_cast<int>(s.blocks.size()) * cfg_.block_size;
  prefix_stats_.hit_tokens += s.num_computed;
}

void Scheduler::cache_full_blocks(Seq& s) {
  const int full = s.num_computed / cfg_.block_size;
  for (int i = 0; i < full; ++i) {
    const int b = s.blocks[i];
    if (pool_.meta(b).hash) continue;
    const std::uint64_t h = block_hash(s, i);
    if (cached_.contains(h)) continue;  // another block already holds these tokens
    pool_.mark_full(b);
    pool_.set_hash(b, h);
    cached_[h] = b;
    hash_of_block_[b] = h;
  }
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int budget = cfg_.max_num_batched_tokens;
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    const std::int64_t id = running_[i];
    Seq& s = seq(id);
    const int pending = static_cast<int>(s.tokens.size()) - s.num_computed;
    const int n = std::min(pending, budget);
    if (n < pending && !cfg_.enable_chunked_prefill) continue;
    ScheduledChunk c{.seq_id = id, .start_pos = s.num_computed, .num_tokens = n, .slots = {}, .samples = n == pending};
    bool ok = allocate_slots(s, n, c.slots);
    while (!ok) {
      const std::int64_t victim = running_.back();
      preempt_newest();
      plan.preempted.push_back(victim);
      if (victim == id) break;
      ok = allocate_slots(s, n, c.slots);
    }
    if (!ok) break;
    budget -= n;
    plan.num_tokens += n;
    plan.chunks.push_back(std::move(c));
  }
  if (!plan.preempted.empty()) return plan;

  while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < cfg_.max_num_seqs) {
    const std::int64_t id = waiting_.front();
    Seq& s = seq(id);
    if (s.use_prefix_cache && s.blocks.empty()) take_cached_prefix(s);
    const int pending = static_cast<int>(s.tokens.size()) - s.num_computed;
    const int n = std::min(pending, budget);
    ScheduledChunk c{.seq_id = id, .start_pos = s.num_computed, .num_tokens = n, .slots = {}, .samples = n == pending};
    if ((n < pending && !cfg_.enable_chunked_prefill) || !allocate_slots(s, n, c.slots)) {
      free_blocks(s);  // gives back the prefix-cache hits; they keep their hashes
      break;
    }
    waiting_.pop_front();
    running_.push_back(id);
    budget -= n;
    plan.num_tokens += n;
    plan.chunks.push_back(std::move(c));
  }
  return plan;
}

void Scheduler::commit(const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    auto it = seqs_.find(c.seq_id);
    if (it == seqs_.end()) continue;  // finished while the step ran
    Seq& s = it->second;
    s.num_computed = c.start_pos + c.num_tokens;
    if (cfg_.enable_prefix_caching) cache_full_blocks(s);
  }
}

void Scheduler::append_token(std::int64_t seq_id, std::int32_t token) { seq(seq_id).tokens.push_back(token); }

void Scheduler::finish(std::int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  free_blocks(it->second);
  seqs_.erase(it);
  if (auto r = std::find(running_.begin(), running_.end(), seq_id); r != running_.end()) running_.erase(r);
  if (auto w = std::find(waiting_.begin(), waiting_.end(), seq_id); w != waiting_.end()) waiting_.erase(w);
}

}  // namespace mo::serve
