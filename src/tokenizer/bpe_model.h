#pragma once
// The byte-level BPE model: a word's bytes -> token ids by applying merges lowest rank first.
#include <array>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mo::tok {

struct BpeModelOptions {
  bool ignore_merges = false;                // a word that is itself a token becomes that token (Llama-3)
  std::optional<std::int32_t> unk;           // for a byte with no token; without it the byte is dropped
  bool fuse_unk = false;                     // consecutive unknown bytes become one unk
  bool duplicate_merge_keeps_first = false;  // llama.cpp keeps a repeated merge's first rank, HF the last
};

class BpeModel {
 public:
  // `vocab`: the model's tokens, text in mapped form ("Ġthe") -> id. `merges`: pairs of mapped texts,
  // highest priority first. A merge whose parts or result are not tokens is skipped, as llama.cpp does.
  BpeModel(const std::unordered_map<std::string, std::int32_t>& vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           const BpeModelOptions& options);
  ~BpeModel();

  // Appends the ids of one pre-tokenized word given as raw bytes.
  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const;

  std::size_t n_merges() const { return merges_.size(); }

 private:
  void merge(std::string_view word, std::vector<std::int32_t>& out) const;

  BpeModelOptions options_;
  // Hashes std::string and std::string_view alike, so lookups by view allocate nothing.
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using StringMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

  // Open addressing over (left << 32 | right) -> (rank << 32 | result): merge lookups are the hot path.
  class PairMap {
   public:
    void reserve(std::size_t n);
    // Returns false (and leaves the value) when the key is present already.
    bool insert(std::uint64_t key, std::uint64_t value, bool overwrite);
    const std::uint64_t* find(std::uint64_t key) const;
    std::size_t size() const { return size_; }

   private:
    std::size_t slot(std::uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
    std::vector<std::uint64_t> keys_, values_;
    unsigned shift_ = 64;
    std::size_t size_ = 0;
  };

  std::array<std::int32_t, 256> byte_id_{};  // -1: byte has no token
  StringMap raw_vocab_;                      // raw bytes -> id, for ignore_merges
  PairMap merges_;
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace mo::tok
