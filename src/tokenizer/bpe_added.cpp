#include "bpe_added.h"

#include <algorithm>

#include "bpe_regex.h"
#include "mo/tokenizer/utf8.h"

namespace mo::tok {

namespace {

// The code point that ends at `end` (start of the last UTF-8 character before it).
std::size_t prev_char_start(std::string_view s, std::size_t end) {
  std::size_t p = end - 1;
  while (p > 0 && end - p < 4 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  return p;
}

bool is_word_char(std::string_view ch) {
  // Alphanumeric (Unicode letters and numbers) or '_', like HF's single_word check.
  static const BpeRegex word(R"(^[\p{L}\p{N}_]$)", false, "added tokens");
  std::vector<std::pair<std::size_t, std::size_t>> m;
  word.find_all(ch, m);
  return !m.empty();
}

// Rust's char::is_whitespace (the White_Space property), which HF's lstrip/rstrip use.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

AddedMatcher::AddedMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (std::uint32_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
  }
}

void AddedMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  if (text.empty()) return;
  std::size_t done = 0;  // end of the last segment emitted
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* hit = nullptr;
    for (const std::uint32_t i : candidates) {
      const std::string& c = tokens_[i].content;
      if (text.compare(pos, c.size(), c) == 0) {
        hit = &tokens_[i];
        break;
      }
    }
    if (!hit) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = pos + hit->content.size();
    pos = stop;  // like an Aho-Corasick scan, a rejected match is not retried shorter
    if (hit->single_word) {
      const bool start_ok = start == 0 || !is_word_char(text.substr(prev_char_start(text, start), start - prev_char_start(text, start)));
      bool stop_ok = stop == text.size();
      if (!stop_ok) {
        std::size_t p = stop;
        utf8_next(text, p);
        stop_ok = !is_word_char(text.substr(stop, p - stop));
      }
      if (!start_ok || !stop_ok) continue;
    }
    if (hit->lstrip) {
      std::size_t s = start;
      while (s > done) {
        const std::size_t p = prev_char_start(text, s);
        std::size_t q = p;
        if (!is_white_space(utf8_next(text, q))) break;
        s = p;
      }
      start = s;
    }
    if (hit->rstrip) {
      while (stop < text.size()) {
        std::size_t q = stop;
        if (!is_white_space(utf8_next(text, q))) break;
        stop = q;
      }
      pos = stop;
    }
    if (start > done) out.push_back({done, start, -1});
    out.push_back({start, stop, hit->id});
    done = stop;
  }
  if (done < text.size()) out.push_back({done, text.size(), -1});
}

}  // namespace mo::tok
