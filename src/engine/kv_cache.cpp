#include "mo/engine/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <utility>

#include "mo/core/error.h"

namespace mo::engine {

KvCacheManager::KvCacheManager(int num_blocks, int block_size) : pool_(num_blocks), block_size_(block_size) {
  check_block_size(block_size);
  if (num_blocks > INT_MAX / block_size)
    throw Error(fmt::format("KV cache: {} blocks of {} tokens exceed the int slot range", num_blocks, block_size));
}

const KvCacheManager::Seq& KvCacheManager::seq(std::int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) throw Error(fmt::format("KV cache: no sequence with id {}", seq_id));
  return it->second;
}

KvCacheManager::Seq& KvCacheManager::seq(std::int64_t seq_id) { return const_cast<Seq&>(std::as_const(*this).seq(seq_id)); }

void KvCacheManager::add_sequence(std::int64_t seq_id) {
  if (!seqs_.try_emplace(seq_id).second) throw Error(fmt::format("KV cache: sequence {} already exists", seq_id));
}

void KvCacheManager::check_count(const Seq& s, std::int64_t seq_id, int n_tokens) const {
  if (n_tokens < 0) throw Error(fmt::format("KV cache: sequence {}: cannot append {} tokens", seq_id, n_tokens));
  if (n_tokens > INT_MAX - block_size_ - s.num_tokens)
    throw Error(fmt::format("KV cache: sequence {}: {} + {} tokens overflows the length", seq_id, s.num_tokens, n_tokens));
}

bool KvCacheManager::needs_copy_on_write(const Seq& s, int n_tokens) const {
  // Only the last block can be partly filled; writing into it while another sequence holds it would
  // change that sequence's tokens, so the writer takes a private copy first.
  return n_tokens > 0 && s.num_tokens % block_size_ != 0 && pool_.ref_count(s.blocks.back()) > 1;
}

int KvCacheManager::blocks_needed(std::int64_t seq_id, int n_tokens) const {
  const Seq& s = seq(seq_id);
  check_count(s, seq_id, n_tokens);
  const int have = static_cast<int>(s.blocks.size());
  const int need = (s.num_tokens + n_tokens + block_size_ - 1) / block_size_;
  return need - have + (needs_copy_on_write(s, n_tokens) ? 1 : 0);
}

std::optional<AppendResult> KvCacheManager::append(std::int64_t seq_id, int n_tokens) {
  Seq& s = seq(seq_id);
  // Checked up front so every allocate() below succeeds and a miss leaves no trace.
  if (blocks_needed(seq_id, n_tokens) > pool_.num_free()) return std::nullopt;

  AppendResult r;
  r.start_pos = s.num_tokens;
  if (needs_copy_on_write(s, n_tokens)) {
    const int shared = s.blocks.back();
    const int own = *pool_.allocate();
    r.copies.push_back({shared, own});
    pool_.release(shared);
    s.blocks.back() = own;
  }
  r.slots.reserve(n_tokens);
  for (int i = 0; i < n_tokens; ++i) {
    const int pos = s.num_tokens + i;
    if (pos % block_size_ == 0) s.blocks.push_back(*pool_.allocate());
    const int block = s.blocks[pos / block_size_];
    r.slots.push_back(block * block_size_ + pos % block_size_);
    if (pos % block_size_ == block_size_ - 1) pool_.mark_full(block);
  }
  s.num_tokens += n_tokens;
  return r;
}

void KvCacheManager::fork(std::int64_t parent, std::int64_t child) {
  const Seq& p = seq(parent);
  if (seqs_.contains(child)) throw Error(fmt::format("KV cache: cannot fork {} into {}: sequence {} already exists", parent, child, child));
  Seq c = p;  // copied before emplace, which may rehash and move p
  c.block_hashes.resize(
      std::min(c.block_hashes.size(), static_cast<std::size_t>(c.num_tokens / block_size_)));  // keys past the fork may not be the child's
  for (int b : c.blocks) pool_.retain(b);
  seqs_.emplace(child, std::move(c));
}

std::uint64_t KvCacheManager::block_hash(Seq& s, std::span<const std::int32_t> tokens, int i) const {
  while (static_cast<int>(s.block_hashes.size()) <= i) {
    const int k = static_cast<int>(s.block_hashes.size());
    const std::uint64_t parent = k == 0 ? kKvRootHash : s.block_hashes[k - 1];
    s.block_hashes.push_back(hash_block_tokens(parent, tokens.subspan(static_cast<std::size_t>(k) * block_size_, block_size_)));
  }
  return s.block_hashes[i];
}

int KvCacheManager::take_cached_prefix(std::int64_t seq_id, std::span<const std::int32_t> tokens) {
  Seq& s = seq(seq_id);
  if (s.num_tokens != 0)
    throw Error(fmt::format("KV cache: sequence {} already holds {} tokens; a cached prefix goes first", seq_id, s.num_tokens));
  const int len = static_cast<int>(tokens.size());
  prefix_stats_.queried_tokens += len;
  const int max_blocks = len > 0 ? (len - 1) / block_size_ : 0;
  for (int i = 0; i < max_blocks; ++i) {
    const auto block = pool_.cached_block(block_hash(s, tokens, i));
    if (!block) break;
    pool_.retain_cached(*block);
    s.blocks.push_back(*block);
  }
  s.num_tokens = static_cast<int>(s.blocks.size()) * block_size_;
  prefix_stats_.hit_tokens += s.num_tokens;
  return s.num_tokens;
}

void KvCacheManager::cache_full_blocks(std::int64_t seq_id, std::span<const std::int32_t> computed) {
  Seq& s = seq(seq_id);
  if (static_cast<int>(computed.size()) > s.num_tokens)
    throw Error(fmt::format("KV cache: sequence {}: {} tokens computed but only {} have slots", seq_id, computed.size(), s.num_tokens));
  const int full = static_cast<int>(computed.size()) / block_size_;
  for (int i = 0; i < full; ++i) {
    const int b = s.blocks[i];
    if (pool_.meta(b).hash) continue;
    pool_.mark_full(b);
    pool_.set_hash(b, block_hash(s, computed, i));  // false: another block already holds these tokens
  }
}

void KvCacheManager::free(std::int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) throw Error(fmt::format("KV cache: cannot free sequence {}: no such sequence", seq_id));
  const std::vector<int>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_.release(*b);
  seqs_.erase(it);
}

}  // namespace mo::engine
