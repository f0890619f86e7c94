#include "mo/serve/scheduler.h"

#include <fmt/format.h>

#include <algorithm>

#include "mo/core/error.h"

namespace mo::serve {

Scheduler::Scheduler(const SchedulerConfig& cfg) : cfg_(cfg), kv_(cfg.num_blocks, cfg.block_size) {
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
std::span<const int> Scheduler::block_table(std::int64_t seq_id) const {
  seq(seq_id);  // throws for an unknown id
  return kv_.contains(seq_id) ? kv_.block_table(seq_id) : std::span<const int>{};
}

void Scheduler::add(std::int64_t seq_id, std::vector<std::int32_t> prompt, bool use_prefix_cache) {
  if (prompt.empty()) throw Error(fmt::format("scheduler: sequence {} has an empty prompt", seq_id));
  Seq s;
  s.tokens = std::move(prompt);
  s.use_prefix_cache = use_prefix_cache && cfg_.enable_prefix_caching;
  if (!seqs_.try_emplace(seq_id, std::move(s)).second) throw Error(fmt::format("scheduler: sequence {} already exists", seq_id));
  waiting_.push_back(seq_id);
}

bool Scheduler::allocate_slots(std::int64_t seq_id, int n, std::vector<int>& slots) {
  if (kv_.num_tokens(seq_id) != seq(seq_id).num_computed)
    throw Error(
        fmt::format("scheduler: sequence {} has slots for {} tokens but {} computed; commit() every plan before the next schedule()",
                    seq_id, kv_.num_tokens(seq_id), seq(seq_id).num_computed));
  auto r = kv_.append(seq_id, n);
  if (!r) return false;
  slots = std::move(r->slots);
  return true;
}

void Scheduler::free_blocks(std::int64_t seq_id) {
  if (kv_.contains(seq_id)) kv_.free(seq_id);
  seq(seq_id).num_computed = 0;
}

void Scheduler::preempt_newest() {
  const std::int64_t victim = running_.back();
  running_.pop_back();
  free_blocks(victim);
  waiting_.push_front(victim);
  ++num_preemptions_;
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
    bool ok = allocate_slots(id, n, c.slots);
    while (!ok) {
      const std::int64_t victim = running_.back();
      preempt_newest();
      plan.preempted.push_back(victim);
      if (victim == id) break;
      ok = allocate_slots(id, n, c.slots);
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
    kv_.add_sequence(id);
    if (s.use_prefix_cache) s.num_computed = kv_.take_cached_prefix(id, s.tokens);
    const int pending = static_cast<int>(s.tokens.size()) - s.num_computed;
    const int n = std::min(pending, budget);
    ScheduledChunk c{.seq_id = id, .start_pos = s.num_computed, .num_tokens = n, .slots = {}, .samples = n == pending};
    if ((n < pending && !cfg_.enable_chunked_prefill) || !allocate_slots(id, n, c.slots)) {
      free_blocks(id);  // gives back the prefix-cache hits; they keep their hashes
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
    if (cfg_.enable_prefix_caching) kv_.cache_full_blocks(c.seq_id, std::span(s.tokens).first(s.num_computed));
  }
}

void Scheduler::append_token(std::int64_t seq_id, std::int32_t token) { seq(seq_id).tokens.push_back(token); }

void Scheduler::finish(std::int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  free_blocks(seq_id);
  seqs_.erase(it);
  if (auto r = std::find(running_.begin(), running_.end(), seq_id); r != running_.end()) running_.erase(r);
  if (auto w = std::find(waiting_.begin(), waiting_.end(), seq_id); w != waiting_.end()) waiting_.erase(w);
}

}  // namespace mo::serve
