#include "mo/tokenizer/utf8.h"

namespace mo::tok {

namespace {

bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

// Valid range of the second byte after a lead byte (Unicode Table 3-7, well-formed UTF-8): this is what
// excludes overlong forms, surrogates and code points above U+10FFFF.
void second_byte_range(unsigned char lead, unsigned char& lo, unsigned char& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead == 0xE0)
    lo = 0xA0;
  else if (lead == 0xED)
    hi = 0x9F;
  else if (lead == 0xF0)
    lo = 0x90;
  else if (lead == 0xF4)
    hi = 0x8F;
}

}  // namespace

std::size_t utf8_seq_len(unsigned char lead) {
  if (lead < 0xC2) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 1;
}

bool utf8_next_valid(std::string_view s, std::size_t& pos, char32_t& cp) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  if (lead < 0x80) {
    cp = lead;
    ++pos;
    return true;
  }
  const std::size_t len = utf8_seq_len(lead);
  if (len == 1) {  // continuation byte or invalid lead
    ++pos;
    cp = kReplacementChar;
    return false;
  }
  unsigned char lo, hi;
  second_byte_range(lead, lo, hi);
  char32_t value = lead & (0xFF >> (len + 1));
  std::size_t i = 1;
  for (; i < len; ++i) {
    if (pos + i >= s.size()) break;
    const auto c = static_cast<unsigned char>(s[pos + i]);
    if (i == 1 ? (c < lo || c > hi) : !is_cont(c)) break;
    value = (value << 6) | (c & 0x3F);
  }
  if (i < len) {  // the maximal subpart is the lead plus the continuation bytes that were valid so far
    pos += i;
    cp = kReplacementChar;
    return false;
  }
  pos += len;
  cp = value;
  return true;
}

char32_t utf8_next(std::string_view s, std::size_t& pos) {
  char32_t cp;
  utf8_next_valid(s, pos, cp);
  return cp;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(char32_t cp) {
  std::string out;
  utf8_append(out, cp);
  return out;
}

bool utf8_is_valid(std::string_view s) {
  std::size_t pos = 0;
  char32_t cp;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    if (!utf8_next_valid(s, pos, cp)) return false;
  }
  return true;
}

std::string utf8_sanitize(std::string_view s) {
  if (utf8_is_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  std::size_t pos = 0;
  while (pos < s.size()) {
    const std::size_t start = pos;
    char32_t cp;
    if (utf8_next_valid(s, pos, cp))
      out.append(s.substr(start, pos - start));
    else
      utf8_append(out, kReplacementChar);
  }
  return out;
}

std::size_t utf8_incomplete_tail(std::string_view s) {
  // Look back over at most 3 bytes for a lead byte whose sequence runs past the end.
  const std::size_t n = s.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if (is_cont(c)) continue;
    const std::size_t len = utf8_seq_len(c);
    if (len <= back) return 0;
    // Only hold back bytes that can still become a valid character.
    std::size_t pos = n - back;
    char32_t cp;
    std::string_view tail = s.substr(pos);
    std::size_t p = 0;
    utf8_next_valid(tail, p, cp);
    return p == tail.size() ? back : 0;
  }
  return 0;
}

}  // namespace mo::tok
