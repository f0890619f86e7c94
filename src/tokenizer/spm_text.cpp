#include "spm_text.h"

#include "mo/tokenizer/utf8.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>

namespace mo::tok::spm {

namespace {

// Decodes the code point at s[0]; `len` gets its length. Ill-formed bytes decode as -1.
std::int32_t decode_at(std::string_view s, std::size_t& len) {
  std::size_t pos = 0;
  char32_t cp = 0;
  const bool ok = utf8_next_valid(s, pos, cp);
  len = pos;
  return ok ? static_cast<std::int32_t>(cp) : -1;
}

// Start of the last character of `s` (s non-empty).
std::size_t last_char_start(std::string_view s) {
  std::size_t i = s.size() - 1;
  for (int k = 0; k < 3 && i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; ++k) --i;
  std::size_t len = 0;
  decode_at(s.substr(i), len);
  return i + len == s.size() ? i : s.size() - 1;
}

bool is_white_space(std::int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_word_char(std::int32_t cp) {
  if (cp < 0) return false;
  if (cp < 0x80) return std::isalnum(cp) || cp == '_';
  return !is_white_space(cp);
}

}  // namespace

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size());
  std::size_t pos = 0;
  while (true) {
    const std::size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

std::string join_with(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out.append(sep);
    out.append(parts[i]);
  }
  return out;
}

bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

std::size_t trailing_whitespace(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size()) {
    const std::size_t start = last_char_start(s.substr(0, s.size() - n));
    std::size_t len = 0;
    if (!is_white_space(decode_at(s.substr(start), len))) break;
    n = s.size() - start;
  }
  return n;
}

std::size_t leading_whitespace(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size()) {
    std::size_t len = 0;
    if (!is_white_space(decode_at(s.substr(n), len))) break;
    n += len;
  }
  return n;
}

bool ends_with_word_char(std::string_view s) {
  if (s.empty()) return false;
  std::size_t len = 0;
  return is_word_char(decode_at(s.substr(last_char_start(s)), len));
}

bool starts_with_word_char(std::string_view s) {
  if (s.empty()) return false;
  std::size_t len = 0;
  return is_word_char(decode_at(s, len));
}

std::vector<std::string> apply_decoder(const std::vector<HfDecodeStep>& steps, std::vector<std::string> tokens) {
  for (const HfDecodeStep& step : steps) {
    switch (step.kind) {
      case HfDecodeStep::replace:
        for (auto& t : tokens) t = replace_all(t, step.pattern, step.content);
        break;
      case HfDecodeStep::byte_fallback: {
        // Runs of <0xXX> tokens become their bytes when those are valid UTF-8, else one U+FFFD per token.
        std::vector<std::string> out;
        std::string run;
        std::size_t run_tokens = 0;
        auto flush = [&] {
          if (run_tokens == 0) return;
          if (utf8_is_valid(run)) {
            out.push_back(run);
          } else {
            for (std::size_t i = 0; i < run_tokens; ++i) out.push_back(utf8_encode(kReplacementChar));
          }
          run.clear();
          run_tokens = 0;
        };
        for (auto& t : tokens) {
          const bool is_byte = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
                               std::isxdigit(static_cast<unsigned char>(t[3])) && std::isxdigit(static_cast<unsigned char>(t[4]));
          if (is_byte) {
            run.push_back(static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
            ++run_tokens;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens = std::move(out);
        break;
      }
      case HfDecodeStep::fuse: tokens = {join_with(tokens, "")}; break;
      case HfDecodeStep::strip:
        for (auto& t : tokens) {
          std::size_t begin = 0, end = t.size();
          for (int i = 0; i < step.start && begin < end && t.compare(begin, step.content.size(), step.content) == 0; ++i) {
            begin += step.content.size();
          }
          for (int i = 0; i < step.stop && end - begin >= step.content.size() &&
                          t.compare(end - step.content.size(), step.content.size(), step.content) == 0;
               ++i) {
            end -= step.content.size();
          }
          t = t.substr(begin, end - begin);
        }
        break;
      case HfDecodeStep::metaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          const bool drop = i == 0 && step.scheme != PrependScheme::never;
          tokens[i] = replace_all(tokens[i], step.replacement, drop ? "" : " ");
        }
        break;
    }
  }
  return tokens;
}

}  // namespace mo::tok::spm
