#include "jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

#include "jinja_text.h"

namespace mo::tok::jinja {

namespace {

constexpr auto kSyntax = ChatTemplateError::Kind::kSyntax;
constexpr auto kUnsupported = ChatTemplateError::Kind::kUnsupported;

// "\r\n" and "\r" become "\n"; a single trailing newline is dropped (jinja2's keep_trailing_newline=False).
std::string normalize_newlines(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(normalize_newlines(source)) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const std::size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit_text(src_.substr(pos_), pos_);
        pos_ = src_.size();
        break;
      }
      const char kind = src_[tag + 1];
      std::size_t after = tag + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      std::string text = src_.substr(pos_, tag - pos_);
      if (sign == '-') {
        text = py_strip(text, std::nullopt, false, true);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop the spaces and tabs between the line start and a block or comment tag.
        const std::size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting_) && l_pos < text.size() && all_space(text, l_pos)) text.resize(l_pos);
      }
      emit_text(text, pos_);
      line_starting_ = false;
      if (kind == '#') {
        lex_comment(tag, after);
      } else if (kind == '%' && lex_raw(tag, after)) {
        // raw block emitted as text
      } else {
        lex_tag(kind, tag, after);
      }
    }
    out_.push_back(Token{Tok::kEof, "", 0, 0, loc(src_.size())});
    return std::move(out_);
  }

 private:
  Loc loc(std::size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
    return Loc{static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  std::size_t find_tag(std::size_t from) const {
    for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // Bytes of the whitespace code point at `at` (Python's \s), or 0.
  std::size_t space_at(std::size_t at) const {
    if (at >= src_.size()) return 0;
    const auto c = static_cast<unsigned char>(src_[at]);
    if (c < 0x80) return py_isspace(c) ? 1 : 0;
    std::size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    const std::u32string cp = decode_utf8(std::string_view(src_).substr(at, len));
    return cp.size() == 1 && py_isspace(cp[0]) ? len : 0;
  }

  std::size_t skip_spaces(std::size_t at) const {
    while (std::size_t n = space_at(at)) at += n;
    return at;
  }

  static bool all_space(const std::string& s, std::size_t from) {
    for (char32_t cp : decode_utf8(std::string_view(s).substr(from)))
      if (!py_isspace(cp)) return false;
    return true;
  }

  bool starts_with(std::size_t at, const char* s) const { return src_.compare(at, std::strlen(s), s) == 0; }

  void emit_text(const std::string& text, std::size_t at) {
    if (!text.empty()) out_.push_back(Token{Tok::kText, text, 0, 0, loc(at)});
  }

  void lex_comment(std::size_t tag, std::size_t after) {
    std::size_t end = src_.find("#}", after);
    if (end == std::string::npos) fail(kSyntax, loc(tag), "missing end of comment tag");
    const char sign = end > after ? src_[end - 1] : 0;
    pos_ = end + 2;
    if (sign == '-') {
      pos_ = skip_spaces(pos_);
    } else if (sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;  // trim_blocks
    }
    line_starting_ = src_[pos_ - 1] == '\n';
  }

  // {% raw %}...{% endraw %}: the body is text, tags in it are not interpreted.
  bool lex_raw(std::size_t tag, std::size_t after) {
    std::size_t p = skip_spaces(after);
    if (!starts_with(p, "raw")) return false;
    p = skip_spaces(p + 3);
    if (starts_with(p, "-%}")) {
      p = skip_spaces(p + 3);
    } else if (starts_with(p, "%}")) {
      p += 2;
    } else {
      return false;
    }
    for (std::size_t end = src_.find("{%", p); end != std::string::npos; end = src_.find("{%", end + 1)) {
      std::size_t q = end + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = skip_spaces(q);
      if (!starts_with(q, "endraw")) continue;
      q = skip_spaces(q + 6);
      std::string text = src_.substr(p, end - p);
      if (sign == '-') {
        text = py_strip(text, std::nullopt, false, true);
      } else if (sign != '+') {
        const std::size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (l_pos > 0 && l_pos < text.size() && all_space(text, l_pos)) text.resize(l_pos);
      }
      if (starts_with(q, "+%}")) {
        q += 3;
      } else if (starts_with(q, "-%}")) {
        q = skip_spaces(q + 3);
      } else if (starts_with(q, "%}")) {
        q += 2;
        if (q < src_.size() && src_[q] == '\n') ++q;
      } else {
        continue;
      }
      emit_text(text, p);
      pos_ = q;
      line_starting_ = src_[pos_ - 1] == '\n';
      return true;
    }
    fail(kSyntax, loc(tag), "missing end of raw directive");
  }

  void lex_tag(char kind, std::size_t tag, std::size_t after) {
    const bool block = kind == '%';
    out_.push_back(Token{block ? Tok::kBlockBegin : Tok::kVarBegin, block ? "{%" : "{{", 0, 0, loc(tag)});
    std::vector<char> brackets;
    std::size_t p = after;
    while (true) {
      if (p >= src_.size()) fail(kSyntax, loc(tag), std::string("unexpected end of template, expected '") + (block ? "%}" : "}}") + "'");
      if (brackets.empty() && end_tag(block, p)) return;
      if (std::size_t n = space_at(p)) {
        p += n;
        continue;
      }
      const char c = src_[p];
      const Loc at = loc(p);
      if (c >= '0' && c <= '9') {
        p = lex_number(p);
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t e = p;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        out_.push_back(Token{Tok::kName, src_.substr(p, e - p), 0, 0, at});
        p = e;
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* kOps2[] = {"//", "**", "==", "!=", ">=", "<="};
        std::string op;
        for (const char* o : kOps2)
          if (starts_with(p, o)) op = o;
        if (op.empty()) {
          if (std::strchr("+-/*%~[](){}><=.:|,;", c) == nullptr || c == 0) fail(kSyntax, at, std::string("unexpected char '") + c + "'");
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") {
          brackets.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (brackets.empty()) fail(kSyntax, at, "unexpected '" + op + "'");
          if (brackets.back() != op[0]) fail(kSyntax, at, "unexpected '" + op + "', expected '" + std::string(1, brackets.back()) + "'");
          brackets.pop_back();
        }
        out_.push_back(Token{Tok::kOp, op, 0, 0, at});
        p += op.size();
      }
    }
  }

  // Recognizes the end of a tag at `p`; on success emits it and moves pos_ past it.
  bool end_tag(bool block, std::size_t p) {
    const char* close = block ? "%}" : "}}";
    const Loc at = loc(p);
    std::size_t q;
    if (block && starts_with(p, "+%}")) {
      q = p + 3;
    } else if (src_[p] == '-' && starts_with(p + 1, close)) {
      q = skip_spaces(p + 3);
    } else if (starts_with(p, close)) {
      q = p + 2;
      if (block && q < src_.size() && src_[q] == '\n') ++q;  // trim_blocks
    } else {
      return false;
    }
    out_.push_back(Token{block ? Tok::kBlockEnd : Tok::kVarEnd, close, 0, 0, at});
    pos_ = q;
    line_starting_ = src_[q - 1] == '\n';
    return true;
  }

  std::size_t scan_digits(std::size_t p, bool (*is_digit)(char)) const {
    // digits with single underscores between them: 1_000
    while (p < src_.size()) {
      if (is_digit(src_[p])) {
        ++p;
      } else if (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])) {
        p += 2;
      } else {
        break;
      }
    }
    return p;
  }

  static bool dec(char c) { return c >= '0' && c <= '9'; }
  static bool hex(char c) { return dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
  static bool oct(char c) { return c >= '0' && c <= '7'; }
  static bool bin(char c) { return c == '0' || c == '1'; }

  std::size_t lex_number(std::size_t p) {
    const Loc at = loc(p);
    auto digits_only = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    if (src_[p] == '0' && p + 2 < src_.size() && std::strchr("xXoObB", src_[p + 1]) != nullptr) {
      const char base_char = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[p + 1])));
      auto* is_digit = base_char == 'x' ? &Lexer::hex : base_char == 'o' ? &Lexer::oct : &Lexer::bin;
      std::size_t b = p + 2;
      if (src_[b] == '_') ++b;
      const std::size_t e = scan_digits(b, is_digit);
      if (e > b) {
        const int base = base_char == 'x' ? 16 : base_char == 'o' ? 8 : 2;
        const std::string text = digits_only(src_.substr(b, e - b));
        std::uint64_t value = 0;
        try {
          value = std::stoull(text, nullptr, base);
        } catch (const std::out_of_range&) {
          fail(kUnsupported, at, "number out of range: " + src_.substr(p, e - p));
        }
        out_.push_back(Token{Tok::kInt, "", static_cast<int64_t>(value), 0, at});
        return e;
      }
    }
    std::size_t e = scan_digits(p, &Lexer::dec);
    bool is_float = false;
    const bool after_dot = p > 0 && src_[p - 1] == '.';
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' && dec(src_[e + 1])) {
      e = scan_digits(e + 1, &Lexer::dec);
      is_float = true;
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      std::size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && dec(src_[x])) {
        e = scan_digits(x, &Lexer::dec);
        is_float = true;
      }
    }
    const std::string text = digits_only(src_.substr(p, e - p));
    Token t{is_float ? Tok::kFloat : Tok::kInt, text, 0, 0, at};
    try {
      if (is_float)
        t.float_value = std::stod(text);
      else
        t.int_value = std::stoll(text);
    } catch (const std::out_of_range&) {
      fail(kUnsupported, at, "number out of range: " + text);
    }
    out_.push_back(std::move(t));
    return e;
  }

  std::size_t lex_string(std::size_t p) {
    const Loc at = loc(p);
    const char quote = src_[p];
    std::size_t e = p + 1;
    while (e < src_.size() && src_[e] != quote) e += src_[e] == '\\' ? 2 : 1;
    if (e >= src_.size()) fail(kSyntax, at, std::string("unexpected char '") + quote + "'");
    out_.push_back(Token{Tok::kString, unescape(src_.substr(p + 1, e - p - 1), at), 0, 0, at});
    return e + 1;
  }

  // Python's unicode-escape decoding, which jinja2 applies to string literals.
  static std::string unescape(const std::string& s, const Loc& at) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\' || i + 1 >= s.size()) {
        out.push_back(s[i]);
        continue;
      }
      const char c = s[++i];
      auto hex_escape = [&](std::size_t n) {
        char32_t cp = 0;
        for (std::size_t k = 1; k <= n; ++k) {
          const char h = i + k < s.size() ? s[i + k] : 0;
          if (!hex(h)) fail(kSyntax, at, "truncated escape in string literal");
          cp = cp * 16 + static_cast<char32_t>(dec(h) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        i += n;
        append_utf8(out, cp);
      };
      switch (c) {
        case '\n': break;  // line continuation
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x': hex_escape(2); break;
        case 'u': hex_escape(4); break;
        case 'U': hex_escape(8); break;
        case 'N': fail(kUnsupported, at, "\\N{...} escapes are not supported");
        default:
          if (oct(c)) {
            char32_t cp = static_cast<char32_t>(c - '0');
            for (int k = 0; k < 2 && i + 1 < s.size() && oct(s[i + 1]); ++k) cp = cp * 8 + static_cast<char32_t>(s[++i] - '0');
            append_utf8(out, cp);
          } else {
            out.push_back('\\');
            out.push_back(c);
          }
      }
    }
    return out;
  }

  std::string src_;
  std::size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) { return Lexer(source).run(); }

}  // namespace mo::tok::jinja
