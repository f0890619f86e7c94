#include "jinja_text.h"

#include "jinja_limits.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace mo::tok::jinja {

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (!ok) {
      out.push_back(c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

std::string encode_utf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

bool py_isspace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string cps = decode_utf8(s);
  std::u32string set;
  if (chars) set = decode_utf8(*chars);
  auto strip_it = [&](char32_t cp) { return chars ? set.find(cp) != std::u32string::npos : py_isspace(cp); };
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return encode_utf8(std::u32string_view(cps).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (!sep) {
    const std::u32string cps = decode_utf8(s);
    std::vector<std::pair<std::size_t, std::size_t>> words;  // [begin, end) in code points
    if (!from_right) {
      std::size_t i = 0;
      while (i < cps.size()) {
        while (i < cps.size() && py_isspace(cps[i])) ++i;
        if (i == cps.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          std::size_t e = cps.size();
          while (e > i && py_isspace(cps[e - 1])) --e;
          words.emplace_back(i, e);
          break;
        }
        std::size_t j = i;
        while (j < cps.size() && !py_isspace(cps[j])) ++j;
        words.emplace_back(i, j);
        i = j;
      }
    } else {
      std::size_t i = cps.size();
      while (i > 0) {
        while (i > 0 && py_isspace(cps[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          std::size_t b = 0;
          while (b < i && py_isspace(cps[b])) ++b;
          words.emplace_back(b, i);
          break;
        }
        std::size_t j = i;
        while (j > 0 && !py_isspace(cps[j - 1])) --j;
        words.emplace_back(j, i);
        i = j;
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto [b, e] : words) parts.push_back(encode_utf8(std::u32string_view(cps).substr(b, e - b)));
    return parts;
  }
  const std::string& d = *sep;
  if (!from_right) {
    std::size_t start = 0;
    while (true) {
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
      const std::size_t at = s.find(d, start);
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, at - start));
      start = at + d.size();
    }
    parts.emplace_back(s.substr(start));
  } else {
    std::size_t end = s.size();
    std::vector<std::string> rev;
    while (true) {
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) == maxsplit) break;
      if (end < d.size()) break;
      const std::size_t at = s.rfind(d, end - d.size());
      if (at == std::string_view::npos) break;
      rev.emplace_back(s.substr(at + d.size(), end - at - d.size()));
      end = at;
    }
    rev.emplace_back(s.substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
  }
  return parts;
}

std::string py_replace(const Loc& loc, std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` before every character and at the end.
    const std::u32string cps = decode_utf8(s);
    int64_t done = 0;
    for (char32_t cp : cps) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
        check_bytes(out.size(), loc);
      }
      append_utf8(out, cp);
    }
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  std::size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const std::size_t at = s.find(old_text, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(new_text);
    check_bytes(out.size(), loc);
    start = at + old_text.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

namespace {

// Simple case pairs of Latin-1, Latin Extended-A, Greek, Cyrillic and fullwidth Latin; other scripts
// are left as they are.
char32_t to_upper_cp(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  if (c == 0xff) return 0x178;
  if (c == 0xb5) return 0x39c;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177)) return c & ~char32_t{1};
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c % 2 == 0) ? c - 1 : c;
  if (c == 0x131) return 'I';
  if (c == 0x17f) return 'S';
  if (c >= 0x3b1 && c <= 0x3c9) return c == 0x3c2 ? 0x3a3 : c - 32;
  if (c == 0x3ac) return 0x386;
  if (c >= 0x3ad && c <= 0x3af) return c - 37;
  if (c == 0x3cc) return 0x38c;
  if (c == 0x3cd || c == 0x3ce) return c - 63;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48a && c <= 0x4bf)) return c & ~char32_t{1};
  if (c >= 0xff41 && c <= 0xff5a) return c - 32;
  return c;
}

char32_t to_lower_cp(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
  if (c == 0x178) return 0xff;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177)) return c | 1;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 37;
  if (c == 0x38c) return 0x3cc;
  if (c == 0x38e || c == 0x38f) return c + 63;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48a && c <= 0x4bf)) return c | 1;
  if (c >= 0xff21 && c <= 0xff3a) return c + 32;
  return c;
}

bool is_cased(char32_t c) { return to_upper_cp(c) != c || to_lower_cp(c) != c || c == 0xdf; }

void append_upper(std::string& out, char32_t c) {
  if (c == 0xdf) {
    out += "SS";  // Python's full mapping of ß
    return;
  }
  append_utf8(out, to_upper_cp(c));
}

}  // namespace

std::string py_upper(std::string_view s) {
  std::string out;
  for (char32_t c : decode_utf8(s)) append_upper(out, c);
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  for (char32_t c : decode_utf8(s)) append_utf8(out, to_lower_cp(c));
  return out;
}

bool py_islower(std::string_view s) {
  bool cased = false;
  for (char32_t c : decode_utf8(s)) {
    if (to_lower_cp(c) != c) return false;
    cased = cased || is_cased(c);
  }
  return cased;
}

bool py_isupper(std::string_view s) {
  bool cased = false;
  for (char32_t c : decode_utf8(s)) {
    if (to_upper_cp(c) != c || c == 0xdf) return false;
    cased = cased || is_cased(c);
  }
  return cased;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : decode_utf8(s)) {
    if (is_cased(c)) {
      if (prev_cased)
        append_utf8(out, to_lower_cp(c));
      else if (c == 0xdf)
        out += "Ss";
      else
        append_utf8(out, to_upper_cp(c));
      prev_cased = true;
    } else {
      append_utf8(out, c);
      prev_cased = false;
    }
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  const std::u32string cps = decode_utf8(s);
  std::string out;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (i == 0 && cps[0] == 0xdf)
      out += "Ss";
    else if (i == 0)
      append_utf8(out, to_upper_cp(cps[0]));
    else
      append_utf8(out, to_lower_cp(cps[i]));
  }
  return out;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form "d.ddde±x", then Python's layout: fixed notation
  // when the decimal exponent is in [-4, 16), scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const std::size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp10 = std::stoi(sci.substr(epos + 1));
  const int decpt = exp10 + 1;  // value = 0.digits * 10^decpt
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out = "0." + std::string(-decpt, '0') + digits;
    } else if (decpt >= static_cast<int>(digits.size())) {
      out = digits + std::string(decpt - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    out += e;
  }
  return sign + out;
}

std::string py_str_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : decode_utf8(s)) {
    char buf[16];
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      append_utf8(out, cp);
    }
  }
  out.push_back(quote);
  return out;
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  for (char32_t cp : decode_utf8(s)) {
    char buf[16];
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
          out += buf;
        } else if (ensure_ascii && cp > 0x7e) {
          if (cp >= 0x10000) {
            const char32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 + (v >> 10)),
                          static_cast<unsigned>(0xdc00 + (v & 0x3ff)));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
          }
          out += buf;
        } else {
          append_utf8(out, cp);
        }
    }
  }
  out += "\"";
  return out;
}

}  // namespace mo::tok::jinja
