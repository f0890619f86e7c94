#pragma once
// Paged KV cache bookkeeping: per-sequence block tables over a shared BlockPool, with forks that share
// a common prefix, copy-on-write when a shared, partly filled block is appended to, and prefix caching
// (a new sequence starts from the cached blocks of an earlier one with the same leading tokens). Host data only;
// the engine applies the returned slots and copies to KvStorage (or device memory). Modelled on vLLM's
// block manager and TensorRT-LLM's kvCacheManager.
//
// A token's slot is block * block_size + offset: its row in the [num_blocks * block_size, ...] view of
// a layer's K or V cache.
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "mo/engine/kv_block_pool.h"
#include "mo/engine/kv_layout.h"

namespace mo::engine {

// Copy a whole block (every layer, K and V) from src_block to dst_block.
struct BlockCopy {
  int src_block = 0;
  int dst_block = 0;
  bool operator==(const BlockCopy&) const = default;
};

struct PrefixCacheStats {
  std::int64_t queried_tokens = 0;  // tokens looked up by take_cached_prefix
  std::int64_t hit_tokens = 0;      // of those, found in cached blocks
};

struct AppendResult {
  int start_pos = 0;              // position in the sequence of the first new token
  std::vector<int> slots;         // [n_tokens] slot of each new token, in order
  std::vector<BlockCopy> copies;  // copy-on-write: perform BEFORE writing the new tokens' K and V
};

class KvCacheManager {
 public:
  // Throws UsageError naming block_size unless it is 8, 16 or 32.
  KvCacheManager(int num_blocks, int block_size = 16);

  // A new, empty sequence (holds no blocks yet). A seq_id already present is a bug: throws mo::Error.
  void add_sequence(std::int64_t seq_id);
  bool contains(std::int64_t seq_id) const { return seqs_.contains(seq_id); }

  // Reserves slots for n_tokens new tokens of seq_id, allocating blocks as needed. When the pool cannot
  // supply them all, returns nullopt and changes nothing (all or nothing).
  std::optional<AppendResult> append(std::int64_t seq_id, int n_tokens);
  // Blocks append(seq_id, n_tokens) would take from the pool, counting a copy-on-write block.
  int blocks_needed(std::int64_t seq_id, int n_tokens) const;
  bool can_append(std::int64_t seq_id, int n_tokens) const { return blocks_needed(seq_id, n_tokens) <= pool_.num_free(); }

  // child starts as a copy of parent that shares all its blocks (ref counts +1): the common-prefix case.
  // Takes no free block, so it cannot run out. child must be new.
  void fork(std::int64_t parent, std::int64_t child);
  // Ends seq_id and releases its blocks (tail first, so a prefix stays on the free list longest).
  void free(std::int64_t seq_id);

  // Prefix caching, as vLLM's KVCacheManager over its BlockPool. For seq_id, which holds no tokens yet:
  // takes the longest run of cached blocks equal to the leading full blocks of `tokens` (one more holder
  // each), leaving at least the last token to compute (its logits give the next token). Returns the
  // tokens taken, now seq_id's first ones. `tokens` must start with the same tokens on every call.
  int take_cached_prefix(std::int64_t seq_id, std::span<const std::int32_t> tokens);
  // Once the K and V of `computed` (seq_id's first tokens) are written: enters its full blocks in the
  // prefix cache, so that a later sequence starting with the same tokens reuses them.
  void cache_full_blocks(std::int64_t seq_id, std::span<const std::int32_t> computed);
  const PrefixCacheStats& prefix_cache_stats() const { return prefix_stats_; }

  int num_tokens(std::int64_t seq_id) const { return seq(seq_id).num_tokens; }
  // Block ids in sequence order; valid until the next append/fork/free/add_sequence.
  std::span<const int> block_table(std::int64_t seq_id) const { return seq(seq_id).blocks; }
  int num_sequences() const { return static_cast<int>(seqs_.size()); }
  int block_size() const { return block_size_; }
  int num_free_blocks() const { return pool_.num_free(); }
  int num_used_blocks() const { return pool_.num_used(); }
  int num_total_blocks() const { return pool_.num_total(); }
  const BlockPool& pool() const { return pool_; }

 private:
  struct Seq {
    std::vector<int> blocks;
    int num_tokens = 0;
    std::vector<std::uint64_t> block_hashes;  // prefix-cache keys of the leading full blocks, as far as needed
  };
  const Seq& seq(std::int64_t seq_id) const;
  Seq& seq(std::int64_t seq_id);
  // Throws mo::Error for a negative count or one that overflows the sequence length.
  void check_count(const Seq& s, std::int64_t seq_id, int n_tokens) const;
  bool needs_copy_on_write(const Seq& s, int n_tokens) const;
  // Key of full block i of `tokens`, computed once per sequence and kept (each key covers all blocks before it).
  std::uint64_t block_hash(Seq& s, std::span<const std::int32_t> tokens, int i) const;

  BlockPool pool_;
  int block_size_;
  std::unordered_map<std::int64_t, Seq> seqs_;
  PrefixCacheStats prefix_stats_;
};

}  // namespace mo::engine
