#pragma once
// A tokenizer for serve tests that need no model: one token per byte (id = byte value), BOS = 256; and
// a fake model over it.
#include <span>
#include <string>
#include <vector>

#include "mo/engine/engine.h"
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

// Logits [rows, 257] where byte b + 1 (mod 256) is the most likely (10, the others 0) after byte b, for
// each token a chunk asks logits for: greedy output from "ab" is "cdef...".
inline std::vector<float> next_byte_forward(std::span<const mo::engine::SeqChunk> chunks) {
  std::vector<float> out;
  for (const auto& c : chunks) {
    const std::size_t first = c.all_logits ? 0 : c.tokens.size() - 1;
    for (std::size_t i = first; i < c.tokens.size(); ++i) {
      std::vector<float> row(257, 0.0f);
      row[(c.tokens[i] + 1) % 256] = 10.0f;
      out.insert(out.end(), row.begin(), row.end());
    }
  }
  return out;
}

}  // namespace mo::serve::test_support
