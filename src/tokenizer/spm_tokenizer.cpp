#include "spm_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "mo/core/error.h"
#include "spm_text.h"

namespace mo::tok::spm {

namespace {

constexpr std::string_view kMeta = "\xe2\x96\x81";  // U+2581 "▁"

// "<0x0A>" -> 0x0A; nullopt for anything else. Same test as tokenizers' ByteFallback decoder.
std::optional<unsigned char> parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

std::string byte_token_text(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
  return buf;
}

}  // namespace

SpmTokenizer::SpmTokenizer(SpmConfig config) : cfg_(std::move(config)) {
  ids_.reserve(cfg_.tokens.size());
  for (std::size_t i = 0; i < cfg_.tokens.size(); ++i) {
    if (!cfg_.tokens[i].text.empty()) ids_.emplace(cfg_.tokens[i].text, static_cast<std::int32_t>(i));
  }
  special_.assign(cfg_.tokens.size(), false);
  if (cfg_.algorithm == SpmAlgorithm::llama_cpp) {
    for (std::size_t i = 0; i < cfg_.tokens.size(); ++i) special_[i] = (cfg_.tokens[i].attr & (kAttrControl | kAttrUnknown)) != 0;
  } else {
    // tokenizers looks added tokens up before the model's vocab.
    for (const auto& a : cfg_.added) {
      ids_[cfg_.tokens[check(a.id)].text] = a.id;
      if (a.special) special_[a.id] = true;
    }
  }
  added_by_first_byte_.resize(256);
  for (std::size_t i = 0; i < cfg_.added.size(); ++i) {
    const std::string& t = cfg_.tokens[check(cfg_.added[i].id)].text;
    if (!t.empty()) added_by_first_byte_[static_cast<unsigned char>(t[0])].push_back(i);
  }

  // Is "▁" only ever at the start of a token or after another "▁"? Then words merge independently.
  auto meta_only_leading = [](const std::string& t) {
    for (std::size_t p = t.find(kMeta, 1); p != std::string::npos; p = t.find(kMeta, p + 1)) {
      if (p < kMeta.size() || t.compare(p - kMeta.size(), kMeta.size(), kMeta) != 0) return false;
    }
    return true;
  };
  split_words_ = true;
  if (cfg_.algorithm == SpmAlgorithm::llama_cpp) {
    for (const auto& t : cfg_.tokens) split_words_ = split_words_ && meta_only_leading(t.text);
  } else {
    // Word-level options depend on where a word starts and ends; a "▁" missing from the vocabulary
    // could end up inside a fused unknown token.
    split_words_ = cfg_.continuing_subword_prefix.empty() && cfg_.end_of_word_suffix.empty() && !cfg_.ignore_merges &&
                   cfg_.model_vocab.count(std::string(kMeta)) != 0;
    for (const auto& [t, id] : cfg_.model_vocab) split_words_ = split_words_ && meta_only_leading(t);
  }
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = -1;
    if (auto id = find(byte_token_text(static_cast<unsigned char>(b)))) {
      byte_ids_[b] = *id;
    } else if (cfg_.algorithm == SpmAlgorithm::llama_cpp) {
      // llama_vocab::byte_to_token falls back to the byte itself as a one-character token.
      if (auto id1 = find(std::string(1, static_cast<char>(b)))) byte_ids_[b] = *id1;
    }
  }
}

std::size_t SpmTokenizer::check(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= cfg_.tokens.size()) {
    throw Error(cfg_.source + ": token id " + std::to_string(id) + " is outside the vocabulary (size " +
                std::to_string(cfg_.tokens.size()) + ")");
  }
  return static_cast<std::size_t>(id);
}

std::optional<std::int32_t> SpmTokenizer::find(std::string_view text) const {
  auto it = ids_.find(std::string(text));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string& SpmTokenizer::token_text(std::int32_t id) const { return cfg_.tokens[check(id)].text; }

std::optional<std::int32_t> SpmTokenizer::token_id(std::string_view text) const { return find(text); }

bool SpmTokenizer::is_special(std::int32_t id) const { return special_[check(id)]; }

std::int32_t SpmTokenizer::byte_token(unsigned char byte) const {
  if (byte_ids_[byte] >= 0) return byte_ids_[byte];
  if (cfg_.special.unk) return *cfg_.special.unk;
  throw Error(cfg_.source + ": the vocabulary has no token for byte " + byte_token_text(byte) + " and no unknown token");
}

std::string SpmTokenizer::token_bytes(std::int32_t id) const {
  const SpmToken& t = cfg_.tokens[check(id)];
  if (cfg_.algorithm == SpmAlgorithm::llama_cpp) {
    // llama_vocab::token_to_piece: unused/undefined tokens print nothing, specials print their text.
    if (t.attr & (kAttrControl | kAttrUnknown | kAttrUserDefined)) return t.text;
    if (t.attr & kAttrNormal) return replace_all(t.text, kMeta, " ");
    if (t.attr & kAttrByte) {
      if (auto b = parse_byte_token(t.text)) return std::string(1, static_cast<char>(*b));
    }
    return {};
  }
  // What the decoder turns this token into on its own, before the pieces are joined.
  std::string s = t.text;
  for (const auto& step : cfg_.decoder) {
    if (step.kind == HfDecodeStep::replace) s = replace_all(s, step.pattern, step.content);
    if (step.kind == HfDecodeStep::metaspace) s = replace_all(s, step.replacement, " ");
    if (step.kind == HfDecodeStep::byte_fallback) {
      if (auto b = parse_byte_token(s)) s = std::string(1, static_cast<char>(*b));
    }
  }
  return s;
}

std::vector<SpmTokenizer::Fragment> SpmTokenizer::partition(std::string_view text, bool parse_special) const {
  if (cfg_.algorithm == SpmAlgorithm::llama_cpp) return partition_llama_cpp(text, parse_special);
  return partition_hf(text, parse_special);
}

// llama_vocab::impl::tokenizer_st_partition: one added token at a time, longest first, each splitting
// every text fragment left so far at all its occurrences.
std::vector<SpmTokenizer::Fragment> SpmTokenizer::partition_llama_cpp(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  for (const auto& a : cfg_.added) {
    if (!parse_special && a.special) continue;
    const std::string& needle = cfg_.tokens[a.id].text;
    std::vector<Fragment> next;
    next.reserve(frags.size());
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::size_t base = f.offset, len = f.length;
      while (true) {
        const std::size_t match = text.substr(0, base + len).find(needle, base);
        if (match == std::string_view::npos) {
          if (len > 0) next.push_back({-1, base, len});
          break;
        }
        std::size_t left_len = match - base;
        if (a.lstrip) {
          while (left_len > 0 && is_ascii_space(text[base + left_len - 1])) --left_len;
        }
        if (left_len > 0) next.push_back({-1, base, left_len});
        next.push_back({a.id, 0, 0});
        std::size_t right = match + needle.size();
        std::size_t right_len = base + len - right;
        if (a.rstrip) {
          while (right_len > 0 && is_ascii_space(text[right])) {
            ++right;
            --right_len;
          }
        }
        base = right;
        len = right_len;
      }
    }
    frags = std::move(next);
  }
  return frags;
}

// tokenizers' AddedVocabulary::find_matches: leftmost-longest over all added tokens at once.
std::vector<SpmTokenizer::Fragment> SpmTokenizer::partition_hf(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  std::size_t start_offset = 0;
  std::size_t pos = 0;
  while (pos < text.size() && !cfg_.added.empty()) {
    const SpmAddedToken* best = nullptr;
    std::size_t best_len = 0;
    for (std::size_t i : added_by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      const SpmAddedToken& a = cfg_.added[i];
      const std::string& t = cfg_.tokens[a.id].text;
      if (t.size() > best_len && text.substr(pos, t.size()) == t) {
        best = &a;
        best_len = t.size();
      }
    }
    if (best == nullptr) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = pos + best_len;
    pos = stop;
    // A match that is dropped still consumes its text, as in the Aho-Corasick scan of tokenizers
    // (without parse_special we behave like its split_special_tokens=True).
    if (!parse_special && best->special) continue;
    if (best->single_word && (ends_with_word_char(text.substr(0, start)) || starts_with_word_char(text.substr(stop)))) continue;
    if (best->lstrip) start = std::max(start_offset, start - trailing_whitespace(text.substr(0, start)));
    if (best->rstrip) stop += leading_whitespace(text.substr(stop));
    if (start_offset < start) frags.push_back({-1, start_offset, start - start_offset});
    frags.push_back({best->id, 0, 0});
    start_offset = stop;
    pos = std::max(pos, stop);
  }
  if (start_offset < text.size()) frags.push_back({-1, start_offset, text.size() - start_offset});
  return frags;
}

std::vector<std::int32_t> SpmTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<std::int32_t> out;
  if (add_special) out = cfg_.prefix_ids;
  const auto frags = partition(text, parse_special);
  bool prev_special = true;  // llama.cpp: a space prefix goes in front of the text after each added token
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view piece = text.substr(f.offset, f.length);
    if (cfg_.algorithm == SpmAlgorithm::llama_cpp) {
      std::string s = (cfg_.add_space_prefix && prev_special) ? " " : "";
      s += piece;
      encode_llama_cpp(replace_all(s, " ", kMeta), out);
    } else {
      encode_hf_piece(piece, f.offset == 0, out);
    }
    prev_special = false;
  }
  if (add_special) out.insert(out.end(), cfg_.suffix_ids.begin(), cfg_.suffix_ids.end());
  return out;
}

std::string SpmTokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special) const {
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  if (cfg_.algorithm == SpmAlgorithm::llama_cpp) {
    // The same chain as a Llama tokenizer.json decoder: ▁ -> space, ByteFallback, Fuse, Strip one space.
    for (std::int32_t id : ids) {
      const SpmToken& t = cfg_.tokens[check(id)];
      if (skip_special && special_[id]) continue;
      if (t.attr & (kAttrControl | kAttrUnknown | kAttrUserDefined)) {
        pieces.push_back(t.text);
      } else if (t.attr & kAttrNormal) {
        pieces.push_back(replace_all(t.text, kMeta, " "));
      } else if (t.attr & kAttrByte) {
        if (auto b = parse_byte_token(t.text)) pieces.push_back(byte_token_text(*b));
      }
    }
    std::vector<HfDecodeStep> chain(2);
    chain[0].kind = HfDecodeStep::byte_fallback;
    chain[1].kind = HfDecodeStep::fuse;
    if (cfg_.add_space_prefix) {
      HfDecodeStep& strip = chain.emplace_back();
      strip.kind = HfDecodeStep::strip;
      strip.content = " ";
      strip.start = 1;
    }
    pieces = apply_decoder(chain, std::move(pieces));
  } else {
    for (std::int32_t id : ids) {
      check(id);
      if (skip_special && special_[id]) continue;
      pieces.push_back(cfg_.tokens[id].text);
    }
    if (!cfg_.has_decoder) return join_with(pieces, " ");
    pieces = apply_decoder(cfg_.decoder, std::move(pieces));
  }
  return join_with(pieces, "");
}

}  // namespace mo::tok::spm
