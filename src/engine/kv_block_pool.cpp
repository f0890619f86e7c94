#include "mo/engine/kv_block_pool.h"

#include <fmt/format.h>

#include "mo/core/error.h"

namespace mo::engine {

namespace {

std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finaliser: every input bit reaches every output bit
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

std::uint64_t hash_block_tokens(std::uint64_t parent_hash, std::span<const std::int32_t> tokens) {
  // The length goes in first so a block is never confused with a shorter one that it starts with.
  std::uint64_t h = mix64(parent_hash ^ 0x9e3779b97f4a7c15ull) ^ mix64(tokens.size() + 0x632be59bd9b4e019ull);
  for (std::int32_t t : tokens) h = mix64(h ^ static_cast<std::uint32_t>(t)) + 0x9e3779b97f4a7c15ull;
  return h;
}

BlockPool::BlockPool(int num_blocks) {
  if (num_blocks < 0) throw Error(fmt::format("BlockPool: num_blocks must not be negative, got {}", num_blocks));
  meta_.resize(num_blocks);
  prev_.assign(num_blocks, -1);
  next_.assign(num_blocks, -1);
  for (int b = 0; b < num_blocks; ++b) push_back_free(b);
}

void BlockPool::check_id(int block, const char* op) const {
  if (block < 0 || block >= num_total())
    throw Error(fmt::format("BlockPool::{}: block id {} is out of range [0, {})", op, block, num_total()));
}

const KvBlockMeta& BlockPool::meta(int block) const {
  check_id(block, "meta");
  return meta_[block];
}

void BlockPool::push_back_free(int block) {
  prev_[block] = tail_;
  next_[block] = -1;
  if (tail_ >= 0)
    next_[tail_] = block;
  else
    head_ = block;
  tail_ = block;
  ++num_free_;
}

void BlockPool::unlink_free(int block) {
  if (prev_[block] >= 0)
    next_[prev_[block]] = next_[block];
  else
    head_ = next_[block];
  if (next_[block] >= 0)
    prev_[next_[block]] = prev_[block];
  else
    tail_ = prev_[block];
  prev_[block] = next_[block] = -1;
  --num_free_;
}

std::optional<int> BlockPool::allocate() {
  if (head_ < 0) return std::nullopt;
  const int block = head_;
  unlink_free(block);
  if (meta_[block].hash) cached_.erase(*meta_[block].hash);
  meta_[block] = KvBlockMeta{.ref_count = 1, .full = false, .hash = std::nullopt};
  return block;
}

void BlockPool::retain(int block) {
  check_id(block, "retain");
  if (meta_[block].ref_count == 0) throw Error(fmt::format("BlockPool::retain: block {} is free", block));
  ++meta_[block].ref_count;
}

void BlockPool::release(int block) {
  check_id(block, "release");
  if (meta_[block].ref_count == 0) throw Error(fmt::format("BlockPool::release: block {} is already free (double free)", block));
  if (--meta_[block].ref_count == 0) push_back_free(block);
}

void BlockPool::retain_cached(int block) {
  check_id(block, "retain_cached");
  if (!meta_[block].hash) throw Error(fmt::format("BlockPool::retain_cached: block {} has no hash", block));
  if (meta_[block].ref_count == 0) unlink_free(block);
  ++meta_[block].ref_count;
}

void BlockPool::mark_full(int block) {
  check_id(block, "mark_full");
  if (meta_[block].ref_count == 0) throw Error(fmt::format("BlockPool::mark_full: block {} is free", block));
  meta_[block].full = true;
}

bool BlockPool::set_hash(int block, std::uint64_t hash) {
  check_id(block, "set_hash");
  KvBlockMeta& m = meta_[block];
  if (m.ref_count == 0) throw Error(fmt::format("BlockPool::set_hash: block {} is free", block));
  if (!m.full) throw Error(fmt::format("BlockPool::set_hash: block {} is not full; only full blocks are keyed", block));
  if (m.hash) {
    if (*m.hash == hash) return true;
    throw Error(fmt::format("BlockPool::set_hash: block {} is already keyed; a full block's tokens do not change", block));
  }
  if (!cached_.try_emplace(hash, block).second) return false;
  m.hash = hash;
  return true;
}

std::optional<int> BlockPool::cached_block(std::uint64_t hash) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

}  // namespace mo::engine
