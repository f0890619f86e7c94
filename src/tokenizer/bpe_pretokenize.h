#pragma once
#include "pre_regexes.h"
// Pre-tokenization for byte-level BPE: text -> words, each then merged on its own. Mirrors HF's
// pre_tokenizer Sequence of Split / ByteLevel / Digits / Punctuation steps, and llama.cpp's per-"pre"
// regex lists (each regex splits every piece the previous one produced, keeping matches and gaps).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bpe_regex.h"

namespace mo::tok {

enum class SplitBehavior { isolated, removed, merged_with_previous, merged_with_next, contiguous };

struct PreStep {
  enum class Kind { split, byte_level };
  Kind kind = Kind::split;
  std::shared_ptr<const BpeRegex> regex;  // split: the pattern; byte_level: GPT-2's, or null when !use_regex
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;
  bool add_prefix_space = false;  // byte_level only
};

// Words are returned as views into the text or into `arena` (for text a step had to create).
struct PreTokenized {
  std::vector<std::string_view> words;
  std::vector<std::unique_ptr<std::string>> arena;
};

class PreTokenizer {
 public:
  // From tokenizer.json's "pre_tokenizer". Throws Error naming `source` and the key for a type or
  // option we do not implement, and when there is no ByteLevel step (not a byte-level BPE).
  static PreTokenizer from_json(const nlohmann::json& pre_tokenizer, const std::string& source);
  // llama.cpp style: each regex splits (Isolated) on the raw text, then the bytes are mapped.
  static PreTokenizer from_regexes(const std::vector<std::string>& regexes, const std::string& source);

  // Appends the words of `text` (raw bytes, not yet mapped) to `out.words`.
  void run(std::string_view text, PreTokenized& out) const;

  // Every regex in order, ByteLevel's included (to name the pre-tokenizer).
  std::vector<std::string> patterns() const;

 private:
  std::vector<PreStep> steps_;
  std::size_t byte_level_at_ = 0;  // index of the first ByteLevel step
};

}  // namespace mo::tok
