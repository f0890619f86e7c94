#pragma once
// Host bookkeeping for the blocks of the paged KV cache: which are free, how many sequences hold each,
// which free block is evicted next, and the prefix cache (content key -> block). Plain data, no device pointers (see kv_storage.h for the
// memory itself), so schedulers are testable on the CPU. Modelled on vLLM's BlockPool and
// TensorRT-LLM's KVCacheBlock.
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace mo::engine {

// Hash of a block's parent (the block before it in the sequence) for the first block of a sequence.
inline constexpr std::uint64_t kKvRootHash = 0;

// Content key of one full block: covers the tokens of this block and, through parent_hash, every block
// before it, so equal keys mean equal prefixes. 64-bit, not cryptographic.
std::uint64_t hash_block_tokens(std::uint64_t parent_hash, std::span<const std::int32_t> tokens);

struct KvBlockMeta {
  int ref_count = 0;                  // sequences whose block table holds this block; 0 = on the free list
  bool full = false;                  // every slot written (block_size tokens); only full blocks are hashed
  std::optional<std::uint64_t> hash;  // hash_block_tokens() key for prefix caching, set by the caller once full
};

class BlockPool {
 public:
  explicit BlockPool(int num_blocks);

  // A free block with ref_count 1 and fresh metadata, or nullopt when none is free (an expected miss).
  // Takes the block freed longest ago, so recently freed blocks (and their hashes) survive longest; the
  // block's old contents are gone, so it leaves the prefix cache.
  std::optional<int> allocate();
  // One more holder of an allocated block (a forked sequence).
  void retain(int block);
  // One fewer holder; at 0 the block goes to the back of the free list, keeping its hash until reused.
  void release(int block);
  // A prefix-cache hit: one more holder of a block that still has a hash, taking it back off the free
  // list (keeping its metadata) when no sequence held it.
  void retain_cached(int block);

  // Metadata hooks for prefix caching. mark_full is idempotent. set_hash requires a full block and
  // enters it in the prefix cache under `hash`; false (nothing changes) when another block already
  // holds those tokens. A block keeps its key while free, until allocate() hands it out again.
  void mark_full(int block);
  bool set_hash(int block, std::uint64_t hash);
  // The block holding the tokens keyed `hash` (in use or free), or nullopt: a prefix-cache lookup.
  std::optional<int> cached_block(std::uint64_t hash) const;
  int num_cached() const { return static_cast<int>(cached_.size()); }

  int num_free() const { return num_free_; }
  int num_total() const { return static_cast<int>(meta_.size()); }
  int num_used() const { return num_total() - num_free_; }
  int ref_count(int block) const { return meta(block).ref_count; }
  const KvBlockMeta& meta(int block) const;

 private:
  // Ids and ref counts of the caller are checked here: bad ones are bugs and throw mo::Error.
  void check_id(int block, const char* op) const;
  void push_back_free(int block);
  void unlink_free(int block);

  std::vector<KvBlockMeta> meta_;
  std::unordered_map<std::uint64_t, int> cached_;  // hash -> the one block whose meta holds that hash
  // The free list is intrusive and doubly linked (-1 ends it) so a later prefix cache can take a
  // particular free block back out of the middle in O(1), as vLLM's FreeKVCacheBlockQueue does.
  std::vector<int> prev_, next_;
  int head_ = -1, tail_ = -1;
  int num_free_ = 0;
};

}  // namespace mo::engine
