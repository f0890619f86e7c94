#include "bpe_tokenizer.h"

#include <fmt/format.h>

#include "bpe_bytes.h"
#include "mo/core/error.h"
#include "mo/tokenizer/utf8.h"
#include "unicode_nfc.h"

namespace mo::tok {

namespace {

// "<0x0A>" -> 0x0A; -1 when the text is not a byte token.
int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeSetup s)
    : source_(std::move(s.source)),
      pre_name_(std::move(s.pre_name)),
      text_(std::move(s.text)),
      special_(std::move(s.special)),
      pre_tokenizer_(std::move(s.pre_tokenizer)),
      nfc_(s.nfc),
      prefix_(std::move(s.prefix)),
      suffix_(std::move(s.suffix)),
      special_tokens_(s.special_tokens) {
  special_.resize(text_.size(), 0);
  s.form.resize(text_.size(), BpeSetup::mapped);
  bytes_.resize(text_.size());
  text_to_id_.reserve(text_.size());
  for (std::size_t id = 0; id < text_.size(); ++id) {
    const std::string& t = text_[id];
    if (t.empty()) continue;
    text_to_id_.emplace(t, static_cast<std::int32_t>(id));
    // A mapped token decodes through the byte map; raw text, or text with characters outside the map
    // (HF's ByteLevel decoder then keeps the token as is), decodes to itself.
    const int byte = s.form[id] == BpeSetup::byte ? parse_byte_token(t) : -1;
    if (byte >= 0)
      bytes_[id] = std::string(1, static_cast<char>(byte));
    else if (s.form[id] != BpeSetup::mapped || !mapped_to_bytes(t, bytes_[id]))
      bytes_[id] = t;
  }
  model_ = std::make_unique<BpeModel>(s.model_vocab, s.merges, s.model_options);

  // With a normalizer, HF matches `normalized` added tokens on the normalized text, with their
  // content normalized the same way; without one both kinds match the raw text.
  std::vector<AddedToken> raw[2], normalized[2];
  for (AddedToken t : s.added) {
    const bool after_norm = nfc_ && t.normalized;
    if (after_norm) t.content = nfc(t.content);
    auto& dst = after_norm ? normalized : raw;
    if (!t.special) dst[0].push_back(t);
    dst[1].push_back(t);
  }
  for (int i = 0; i < 2; ++i) {
    raw_added_[i] = AddedMatcher(std::move(raw[i]));
    normalized_added_[i] = AddedMatcher(std::move(normalized[i]));
  }
}

void BpeTokenizer::check_id(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw Error(fmt::format("{}: token id {} is out of range (vocab size {})", source_, id, vocab_size()));
  }
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + prefix_.size() + suffix_.size() + 4);
  if (add_special) out.insert(out.end(), prefix_.begin(), prefix_.end());
  std::vector<TextSegment> segments;
  raw_added_[parse_special ? 1 : 0].split(text, segments);
  for (const TextSegment& seg : segments) {
    if (seg.token >= 0)
      out.push_back(seg.token);
    else
      encode_plain(text.substr(seg.begin, seg.end - seg.begin), parse_special, out);
  }
  if (add_special) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

void BpeTokenizer::encode_plain(std::string_view text, bool parse_special, std::vector<std::int32_t>& out) const {
  if (!nfc_) {
    encode_normalized(text, out);
    return;
  }
  const std::string normalized = nfc(text);
  const AddedMatcher& added = normalized_added_[parse_special ? 1 : 0];
  if (added.empty()) {
    encode_normalized(normalized, out);
    return;
  }
  std::vector<TextSegment> segments;
  added.split(normalized, segments);
  for (const TextSegment& seg : segments) {
    if (seg.token >= 0)
      out.push_back(seg.token);
    else
      encode_normalized(std::string_view(normalized).substr(seg.begin, seg.end - seg.begin), out);
  }
}

void BpeTokenizer::encode_normalized(std::string_view text, std::vector<std::int32_t>& out) const {
  PreTokenized words;
  pre_tokenizer_->run(text, words);
  for (const std::string_view w : words.words) model_->encode_word(w, out);
}

std::string BpeTokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special) const {
  std::string out;
  for (const std::int32_t id : ids) {
    check_id(id);
    if (skip_special && special_[id]) continue;
    out += bytes_[id];
  }
  // HF decodes with from_utf8_lossy: bytes that do not form UTF-8 become U+FFFD.
  return utf8_sanitize(out);
}

std::string BpeTokenizer::token_bytes(std::int32_t id) const {
  check_id(id);
  return bytes_[id];
}

const std::string& BpeTokenizer::token_text(std::int32_t id) const {
  check_id(id);
  return text_[id];
}

std::optional<std::int32_t> BpeTokenizer::token_id(std::string_view text) const {
  const auto it = text_to_id_.find(std::string(text));
  if (it == text_to_id_.end()) return std::nullopt;
  return it->second;
}

bool BpeTokenizer::is_special(std::int32_t id) const {
  check_id(id);
  return special_[id] != 0;
}

}  // namespace mo::tok
