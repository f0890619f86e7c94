#include "safetensors_json.h"

#include <fmt/format.h>

#include <vector>

#include "mo/core/error.h"

namespace mo::st::detail {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

}  // namespace

std::size_t invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      const auto ck = static_cast<unsigned char>(s[i + k]);
      if (ck < 0x80 || ck > 0xbf) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

std::string quote(std::string_view s) {
  constexpr std::size_t kMaxBytes = 120;
  std::size_t n = s.size();
  if (n > kMaxBytes) {
    n = kMaxBytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;  // not inside a character
  }
  std::string out = "'";
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (n < s.size()) out += "...";
  return out + "'";
}

void JsonCursor::fail(std::size_t file_offset, const std::string& message) const {
  throw Error(fmt::format("{}: {} at offset {}", path_, message, file_offset));
}

void JsonCursor::skip_ws() {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    ++pos_;
  }
}

std::size_t JsonCursor::offset() {
  skip_ws();
  return at();
}

char JsonCursor::peek() {
  skip_ws();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

bool JsonCursor::consume(char c) {
  if (peek() != c || pos_ >= text_.size()) return false;
  ++pos_;
  return true;
}

std::string JsonCursor::describe_next() {
  if (peek() == '\0' && pos_ >= text_.size()) return "the end of the header";
  const char c = text_[pos_];
  switch (c) {
    case '"': return "a string";
    case '{': return "an object";
    case '[': return "an array";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: break;
  }
  if (c == '-' || is_digit(c)) return "a number";
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return fmt::format("'{}'", c);
  return fmt::format("byte {:#04x}", u);
}

void JsonCursor::expect(char c, std::string_view what, std::string_view context) {
  if (consume(c)) return;
  const std::size_t where = offset();
  fail(where, fmt::format("{}: expected {}, got {}", context, what, describe_next()));
}

std::string JsonCursor::read_string(std::string_view context) {
  if (peek() != '"') {
    const std::size_t where = at();
    fail(where, fmt::format("{}: expected a string, got {}", context, describe_next()));
  }
  const std::size_t start = at();
  ++pos_;
  std::string out;
  while (true) {
    if (pos_ >= text_.size()) fail(start, fmt::format("{}: unterminated string", context));
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (static_cast<unsigned char>(c) < 0x20) {
      fail(at(), fmt::format("{}: control character {:#04x} inside a string", context, static_cast<unsigned>(c)));
    }
    if (c != '\\') {
      out += c;
      ++pos_;
      continue;
    }
    const std::size_t esc = at();
    if (pos_ + 1 >= text_.size()) fail(esc, fmt::format("{}: unterminated string", context));
    const char e = text_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case '"': out += '"'; continue;
      case '\\': out += '\\'; continue;
      case '/': out += '/'; continue;
      case 'b': out += '\b'; continue;
      case 'f': out += '\f'; continue;
      case 'n': out += '\n'; continue;
      case 'r': out += '\r'; continue;
      case 't': out += '\t'; continue;
      case 'u': break;
      default: fail(esc, fmt::format("{}: invalid escape in a string", context));
    }
    auto read_hex4 = [&](std::size_t escape_at) {
      if (pos_ + 4 > text_.size()) fail(escape_at, fmt::format("{}: truncated \\u escape", context));
      std::uint32_t v = 0;
      for (int i = 0; i < 4; ++i) {
        const int h = hex_value(text_[pos_ + i]);
        if (h < 0) fail(escape_at, fmt::format("{}: invalid \\u escape", context));
        v = v * 16 + static_cast<std::uint32_t>(h);
      }
      pos_ += 4;
      return v;
    };
    std::uint32_t cp = read_hex4(esc);
    if (cp >= 0xdc00 && cp <= 0xdfff) fail(esc, fmt::format("{}: lone low surrogate in a \\u escape", context));
    if (cp >= 0xd800 && cp <= 0xdbff) {
      // A high surrogate must be followed by an escaped low one, as serde_json requires.
      const std::size_t low_at = at();
      if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u') {
        fail(esc, fmt::format("{}: lone high surrogate in a \\u escape", context));
      }
      pos_ += 2;
      const std::uint32_t low = read_hex4(low_at);
      if (low < 0xdc00 || low > 0xdfff) fail(low_at, fmt::format("{}: lone high surrogate in a \\u escape", context));
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    append_utf8(out, cp);
  }
}

// JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
void JsonCursor::skip_number(std::string_view context) {
  const std::size_t start = at();
  auto digits = [&] {
    const std::size_t from = pos_;
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    return pos_ - from;
  };
  auto bad = [&] { fail(start, fmt::format("{}: invalid number", context)); };
  if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
  const std::size_t int_start = pos_;
  const std::size_t n_int = digits();
  if (n_int == 0 || (n_int > 1 && text_[int_start] == '0')) bad();
  if (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    if (digits() == 0) bad();
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    if (digits() == 0) bad();
  }
}

std::uint64_t JsonCursor::read_uint(std::string_view context) {
  const char c = peek();
  const std::size_t start = at();
  if (c != '-' && !is_digit(c)) fail(start, fmt::format("{}: expected a non-negative integer, got {}", context, describe_next()));
  const std::size_t from = pos_;
  skip_number(context);
  const std::string_view token = text_.substr(from, pos_ - from);
  const std::string shown = token.size() > 40 ? std::string(token.substr(0, 40)) + "..." : std::string(token);
  if (token.find_first_of(".eE-") != std::string_view::npos) {
    fail(start, fmt::format("{}: expected a non-negative integer, got {}", context, shown));
  }
  std::uint64_t v = 0;
  for (char d : token) {
    const auto digit = static_cast<std::uint64_t>(d - '0');
    if (v > (UINT64_MAX - digit) / 10) fail(start, fmt::format("{}: integer {} is above 2^64 - 1", context, shown));
    v = v * 10 + digit;
  }
  return v;
}

void JsonCursor::skip_literal(std::string_view context) {
  const std::size_t start = at();
  for (std::string_view lit : {"true", "false", "null"}) {
    if (text_.substr(pos_, lit.size()) == lit) {
      pos_ += lit.size();
      return;
    }
  }
  fail(start, fmt::format("{}: expected a JSON value, got {}", context, describe_next()));
}

void JsonCursor::read_null(std::string_view context) {
  const std::size_t start = offset();
  if (text_.substr(pos_, 4) != "null") fail(start, fmt::format("{}: expected null, got {}", context, describe_next()));
  pos_ += 4;
}

void JsonCursor::skip_value(int depth, std::string_view context) {
  std::vector<char> open;  // closing brackets of the containers entered here
  while (true) {
    // One value starts here: either a container is entered or a scalar is skipped.
    const char c = peek();
    if (c == '{' || c == '[') {
      if (depth + static_cast<int>(open.size()) >= kMaxJsonDepth) {
        fail(at(), fmt::format("{}: JSON nested more than {} deep", context, kMaxJsonDepth));
      }
      ++pos_;
      const char close = c == '{' ? '}' : ']';
      if (!consume(close)) {
        open.push_back(close);
        if (close == '}') {
          read_string(context);
          expect(':', "':'", context);
        }
        continue;
      }
    } else if (c == '"') {
      read_string(context);
    } else if (c == '-' || is_digit(c)) {
      skip_number(context);
    } else {
      skip_literal(context);
    }
    // After a complete value: close containers until one has another element.
    while (!open.empty()) {
      if (consume(',')) {
        if (open.back() == '}') {
          read_string(context);
          expect(':', "':'", context);
        }
        break;
      }
      expect(open.back(), open.back() == '}' ? "',' or '}'" : "',' or ']'", context);
      open.pop_back();
    }
    if (open.empty()) return;
  }
}

void JsonCursor::expect_end() {
  skip_ws();
  if (pos_ < text_.size()) fail(at(), fmt::format("header: expected the end of the header after the JSON object, got {}", describe_next()));
}

}  // namespace mo::st::detail
