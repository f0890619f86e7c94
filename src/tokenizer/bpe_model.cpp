#include "bpe_model.h"

#include <algorithm>
#include <functional>
#include <mutex>

#include "bpe_bytes.h"

namespace mo::tok {

namespace {

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

constexpr std::uint64_t kEmptyKey = ~0ull;  // (-1, -1): no token pair has it

// Words longer than this are merged every time: they are rare and would crowd the cache.
constexpr std::size_t kMaxCachedWordBytes = 64;
constexpr std::size_t kCacheShards = 16;
constexpr std::size_t kCacheEntriesPerShard = 1 << 13;

struct Symbol {
  std::int32_t id;
  std::int32_t prev, next;  // indices into the symbol array, -1 at the ends
  bool alive;
};

struct Candidate {
  std::uint32_t rank;
  std::int32_t pos;  // index of the left symbol
  std::int32_t result;
  // Heap order: lowest rank first, then leftmost, as HF's word.merge_all and llama.cpp do.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

void BpeModel::PairMap::reserve(std::size_t n) {
  std::size_t cap = 16;
  unsigned bits = 4;
  while (cap < 2 * n) {
    cap <<= 1;
    ++bits;
  }
  keys_.assign(cap, kEmptyKey);
  values_.assign(cap, 0);
  shift_ = 64 - bits;
  size_ = 0;
}

bool BpeModel::PairMap::insert(std::uint64_t key, std::uint64_t value, bool overwrite) {
  const std::size_t mask = keys_.size() - 1;
  for (std::size_t i = slot(key);; i = (i + 1) & mask) {
    if (keys_[i] == kEmptyKey) {
      keys_[i] = key;
      values_[i] = value;
      ++size_;
      return true;
    }
    if (keys_[i] == key) {
      if (overwrite) values_[i] = value;
      return false;
    }
  }
}

const std::uint64_t* BpeModel::PairMap::find(std::uint64_t key) const {
  const std::size_t mask = keys_.size() - 1;
  for (std::size_t i = slot(key);; i = (i + 1) & mask) {
    if (keys_[i] == key) return &values_[i];
    if (keys_[i] == kEmptyKey) return nullptr;
  }
}

// Per-word results, sharded so threads encoding at once rarely wait on each other.
struct BpeModel::Cache {
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> map;
  };
  std::array<Shard, kCacheShards> shards;
};

BpeModel::BpeModel(const std::unordered_map<std::string, std::int32_t>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, const BpeModelOptions& options)
    : options_(options), cache_(std::make_unique<Cache>()) {
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab.find(byte_to_mapped(static_cast<unsigned char>(b)));
    byte_id_[b] = it == vocab.end() ? -1 : it->second;
  }
  if (options_.ignore_merges) {
    std::string raw;
    raw_vocab_.reserve(vocab.size());
    for (const auto& [text, id] : vocab)
      if (mapped_to_bytes(text, raw)) raw_vocab_.emplace(raw, id);
  }
  merges_.reserve(merges.size());
  std::string joined;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto left = vocab.find(a), right = vocab.find(b);
    joined.assign(a).append(b);
    const auto result = vocab.find(joined);
    if (left == vocab.end() || right == vocab.end() || result == vocab.end()) continue;
    const std::uint64_t value = (static_cast<std::uint64_t>(rank) << 32) | static_cast<std::uint32_t>(result->second);
    merges_.insert(pair_key(left->second, right->second), value, !options_.duplicate_merge_keeps_first);
  }
}

BpeModel::~BpeModel() = default;

void BpeModel::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1 && byte_id_[static_cast<unsigned char>(word[0])] >= 0) {
    out.push_back(byte_id_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (options_.ignore_merges) {
    const auto it = raw_vocab_.find(word);
    if (it != raw_vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (word.size() > kMaxCachedWordBytes) {
    merge(word, out);
    return;
  }
  auto& shard = cache_->shards[StringHash{}(word) % kCacheShards];
  {
    std::lock_guard lock(shard.mutex);
    const auto it = shard.map.find(word);
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t first = out.size();
  merge(word, out);
  std::lock_guard lock(shard.mutex);
  if (shard.map.size() >= kCacheEntriesPerShard) shard.map.clear();
  shard.map.emplace(std::string(word), std::vector<std::int32_t>(out.begin() + first, out.end()));
}

void BpeModel::merge(std::string_view word, std::vector<std::int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();

  // One symbol per byte; a byte without a token becomes unk (fused when asked) or is dropped.
  bool last_was_unk = false;
  for (const char c : word) {
    std::int32_t id = byte_id_[static_cast<unsigned char>(c)];
    if (id < 0) {
      if (!options_.unk) continue;
      if (last_was_unk && options_.fuse_unk) continue;
      id = *options_.unk;
      last_was_unk = true;
    } else {
      last_was_unk = false;
    }
    const auto index = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  const auto push_candidate = [&](std::int32_t pos) {
    const std::int32_t next = symbols[pos].next;
    if (next < 0) return;
    const std::uint64_t* merge = merges_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (!merge) return;
    heap.push_back({static_cast<std::uint32_t>(*merge >> 32), pos, static_cast<std::int32_t>(*merge & 0xFFFFFFFFu)});
    std::push_heap(heap.begin(), heap.end());
  };
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(symbols.size()); ++i) push_candidate(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    // Skip candidates made stale by an earlier merge of either side.
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const std::uint64_t* merge = merges_.find(pair_key(left.id, right.id));
    if (!merge || static_cast<std::int32_t>(*merge & 0xFFFFFFFFu) != top.result || static_cast<std::uint32_t>(*merge >> 32) != top.rank)
      continue;
    left.id = top.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push_candidate(left.prev);
    push_candidate(top.pos);
  }
  for (std::int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace mo::tok
