#pragma once
// Added tokens ("<|im_start|>", "<think>", llama.cpp's user-defined tokens) found in the text before
// pre-tokenization: leftmost-longest, with HF's single_word / lstrip / rstrip rules.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mo::tok {

struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool special = false;
  bool single_word = false;  // only where not preceded or followed by a word character
  bool lstrip = false;       // also swallows whitespace before it
  bool rstrip = false;       // also swallows whitespace after it
  bool normalized = false;   // matched on the normalized text (content normalized too)
};

struct TextSegment {
  std::size_t begin = 0, end = 0;
  std::int32_t token = -1;  // -1: plain text to pre-tokenize
};

class AddedMatcher {
 public:
  AddedMatcher() = default;
  explicit AddedMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }
  // Splits `text` into plain-text and token segments covering it in order (an lstrip/rstrip token's
  // segment includes the whitespace it swallowed). Empty text gives no segments.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  std::vector<AddedToken> tokens_;
  std::array<std::vector<std::uint32_t>, 256> by_first_byte_;  // indices into tokens_, longest first
};

}  // namespace mo::tok
