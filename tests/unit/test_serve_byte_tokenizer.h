#pragma once
// A tokenizer for serve tests that need no model: one token per byte (id = byte value), BOS = 256.
#include <string>
#include <vector>

#include "mo/tokenizer/tokenizer.h"

namespace mo::serve::test_support {

struct ByteTokenizer : mo::tok::Tokenizer {
  ByteTokenizer() {
    sp.bos = 256;
    sp.add_bos = true;
  }
  std::vector<std::int32_t> encode(std::string_view text, bool add_special, bool) const override {
    std::vector<std::int32_t> ids;
    if (add_special) ids.push_back(256);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<std::int32_t>& ids, bool) const override {
    std::string s;
    for (auto id : ids)
      if (id < 256) s += static_cast<char>(id);
    return s;
  }
  std::string token_bytes(std::int32_t id) const override { return id < 256 ? std::string(1, static_cast<char>(id)) : ""; }
  const std::string& token_text(std::int32_t) const override { return empty; }
  std::optional<std::int32_t> token_id(std::string_view) const override { return std::nullopt; }
  bool is_special(std::int32_t id) const override { return id >= 256; }
  std::int32_t vocab_size() const override { return 257; }
  const mo::tok::SpecialTokens& special() const override { return sp; }
  std::string kind() const override { return "bytes"; }
  std::string pre() const override { return ""; }
  std::string empty;
  mo::tok::SpecialTokens sp;
};

}  // namespace mo::serve::test_support
