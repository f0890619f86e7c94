// The two merge algorithms behind SpmTokenizer::encode, ported step for step from their references
// so ties and oddities resolve the same way: llama.cpp src/llama-vocab.cpp (llm_tokenizer_spm_session)
// and tokenizers/src/models/bpe (BPE::merge_word, Word::merge_all).
#include <cstdio>
#include <optional>
#include <queue>
#include <utility>

#include "mo/tokenizer/utf8.h"
#include "spm_text.h"
#include "spm_tokenizer.h"

namespace mo::tok::spm {

namespace {

// llama.cpp unicode_len_utf8: the length a lead byte announces (continuation bytes count as 1).
std::size_t llama_utf8_len(char c) {
  static constexpr std::size_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<unsigned char>(c) >> 4];
}

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

// Calls f(piece) for the pieces of `text` that merge independently: cut before each "▁" that follows
// another character, which is exact when no token has "▁" after another character (split_words_).
// `len` gives the length of the character at a position, as the merge algorithm cuts characters.
template <typename Len, typename F>
void for_each_word(std::string_view text, bool split, Len len, F f) {
  if (!split) {
    f(text);
    return;
  }
  constexpr std::string_view kMeta = "\xe2\x96\x81";
  std::size_t begin = 0;
  bool prev_meta = true;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t n = len(text, pos);
    const bool meta = text.substr(pos, n) == kMeta;
    if (meta && !prev_meta) {
      f(text.substr(begin, pos - begin));
      begin = pos;
    }
    prev_meta = meta;
    pos += n;
  }
  f(text.substr(begin));
}

}  // namespace

void SpmTokenizer::encode_llama_cpp(std::string_view text, std::vector<std::int32_t>& out) const {
  auto len = [](std::string_view t, std::size_t pos) { return std::min(llama_utf8_len(t[pos]), t.size() - pos); };
  for_each_word(text, split_words_, len, [&](std::string_view word) { merge_llama_cpp(word, out); });
}

void SpmTokenizer::merge_llama_cpp(std::string_view text, std::vector<std::int32_t>& out) const {
  struct Symbol {
    int prev, next;
    const char* text;
    std::size_t n;
  };
  struct Bigram {
    int left, right;
    float score;
    std::size_t size;
  };
  // Highest score first; on equal scores the leftmost pair.
  auto lower = [](const Bigram& l, const Bigram& r) { return l.score < r.score || (l.score == r.score && l.left > r.left); };

  std::vector<Symbol> symbols;
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(lower)> queue(lower);

  for (std::size_t offs = 0; offs < text.size();) {
    const std::size_t n = std::min(llama_utf8_len(text[offs]), text.size() - offs);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offs + n == text.size() ? -1 : index + 1, text.data() + offs, n});
    offs += n;
  }
  if (symbols.empty()) return;

  auto try_add_bigram = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    std::string joined(symbols[left].text, symbols[left].n + symbols[right].n);
    auto id = find(joined);
    if (!id) return;
    queue.push({left, right, cfg_.tokens[*id].score, joined.size()});
  };

  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add_bigram(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Skip pairs whose symbols were merged into something else since they were queued.
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }

  // llama.cpp's resegment: a symbol that is not a token goes out as bytes. Its rev_merge lookup never
  // hits (only unmerged one-character symbols can miss the vocabulary, and a merge joins at least two
  // characters), so it is left out.
  for (int i = 0; i != -1; i = symbols[i].next) {
    const Symbol& symbol = symbols[i];
    if (auto id = find(std::string_view(symbol.text, symbol.n))) {
      out.push_back(*id);
    } else {
      for (std::size_t j = 0; j < symbol.n; ++j) out.push_back(byte_token(static_cast<unsigned char>(symbol.text[j])));
    }
  }
}

void SpmTokenizer::encode_hf_piece(std::string_view text, bool at_start, std::vector<std::int32_t>& out) const {
  std::string s(text);
  for (const auto& step : cfg_.normalizer) {
    if (step.kind == HfNormalizeStep::prepend) {
      if (!s.empty()) s = step.text + s;
    } else {
      s = replace_all(s, step.text, step.replacement);
    }
  }
  if (!cfg_.metaspace) {
    if (!s.empty()) encode_hf_word(s, out);
    return;
  }
  const HfMetaspace& ms = *cfg_.metaspace;
  s = replace_all(s, " ", ms.replacement);
  const bool starts = s.compare(0, ms.replacement.size(), ms.replacement) == 0;
  if ((ms.scheme == PrependScheme::always && !starts) || (ms.scheme == PrependScheme::first && !starts && at_start)) {
    s = ms.replacement + s;
  }
  if (!ms.split) {
    if (!s.empty()) encode_hf_word(s, out);
    return;
  }
  // Split before every replacement character ("MergedWithNext"): "▁Hey▁▁you" -> "▁Hey", "▁", "▁you".
  std::size_t begin = 0;
  for (std::size_t pos = s.find(ms.replacement, 1); pos != std::string::npos; pos = s.find(ms.replacement, pos + 1)) {
    if (pos > begin) encode_hf_word(std::string_view(s).substr(begin, pos - begin), out);
    begin = pos;
  }
  if (begin < s.size()) encode_hf_word(std::string_view(s).substr(begin), out);
}

void SpmTokenizer::encode_hf_word(std::string_view word, std::vector<std::int32_t>& out) const {
  const auto& vocab = cfg_.model_vocab;
  if (cfg_.ignore_merges) {
    if (auto it = vocab.find(std::string(word)); it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  auto len = [](std::string_view t, std::size_t pos) {
    std::size_t end = pos;
    utf8_next(t, end);
    return end - pos;
  };
  for_each_word(word, split_words_, len, [&](std::string_view piece) { merge_hf(piece, out); });
}

void SpmTokenizer::merge_hf(std::string_view word, std::vector<std::int32_t>& out) const {
  const auto& vocab = cfg_.model_vocab;

  struct Symbol {
    std::int32_t c;
    long prev, next;
    std::size_t len;  // bytes of the word it covers; 0 once merged into its left neighbour
  };
  std::vector<Symbol> symbols;
  auto add = [&](std::int32_t c, std::size_t len) {
    long prev = -1;
    if (!symbols.empty()) {
      symbols.back().next = static_cast<long>(symbols.size());
      prev = static_cast<long>(symbols.size()) - 1;
    }
    symbols.push_back({c, prev, -1, len});
  };

  // BPE::merge_word: one symbol per character, byte fallback or (fused) unknown for the rest.
  bool has_unk = false;  // an unknown run waiting to be added
  std::size_t unk_len = 0;
  for (std::size_t i = 0; i < word.size();) {
    std::size_t end = i;
    utf8_next(word, end);
    std::string s(word.substr(i, end - i));
    if (i != 0) s = cfg_.continuing_subword_prefix + s;
    if (end == word.size()) s += cfg_.end_of_word_suffix;
    const std::size_t byte_len = end - i;
    i = end;
    if (auto it = vocab.find(s); it != vocab.end()) {
      if (has_unk) add(*cfg_.model_unk, unk_len);
      has_unk = false;
      add(it->second, byte_len);
      continue;
    }
    if (cfg_.byte_fallback) {
      std::vector<std::int32_t> bytes;
      for (unsigned char b : s) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        auto bt = vocab.find(name);
        if (bt == vocab.end()) break;
        bytes.push_back(bt->second);
      }
      if (bytes.size() == s.size()) {
        for (std::int32_t b : bytes) add(b, 1);
        continue;
      }
    }
    if (cfg_.model_unk) {
      if (has_unk && cfg_.fuse_unk) {
        unk_len += byte_len;
      } else {
        if (has_unk) add(*cfg_.model_unk, unk_len);
        has_unk = true;
        unk_len = byte_len;
      }
    }
  }
  if (has_unk) add(*cfg_.model_unk, unk_len);

  // Word::merge_all: lowest rank first, then leftmost; queued pairs that went stale are skipped.
  struct Merge {
    std::size_t pos;
    std::int32_t rank, new_id;
  };
  auto lower = [](const Merge& a, const Merge& b) { return a.rank > b.rank || (a.rank == b.rank && a.pos > b.pos); };
  std::priority_queue<Merge, std::vector<Merge>, decltype(lower)> queue(lower);
  auto lookup = [&](std::int32_t l, std::int32_t r) -> const std::pair<std::int32_t, std::int32_t>* {
    auto it = cfg_.merges.find(pair_key(l, r));
    return it == cfg_.merges.end() ? nullptr : &it->second;
  };
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (auto m = lookup(symbols[i].c, symbols[i + 1].c)) queue.push({i, m->first, m->second});
  }
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& cur = symbols[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const std::size_t next_pos = static_cast<std::size_t>(cur.next);
    const Symbol right = symbols[next_pos];
    const auto* m = lookup(cur.c, right.c);
    if (m == nullptr || m->second != top.new_id) continue;
    cur.c = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next > -1 && static_cast<std::size_t>(right.next) < symbols.size()) symbols[right.next].prev = static_cast<long>(top.pos);
    if (cur.prev >= 0) {
      if (auto pm = lookup(symbols[cur.prev].c, cur.c)) queue.push({static_cast<std::size_t>(cur.prev), pm->first, pm->second});
    }
    if (cur.next >= 0) {
      if (auto nm = lookup(cur.c, symbols[cur.next].c)) queue.push({top.pos, nm->first, nm->second});
    }
  }
  for (const Symbol& s : symbols) {
    if (s.len != 0) out.push_back(s.c);
  }
}

}  // namespace mo::tok::spm
