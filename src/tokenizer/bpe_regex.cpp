#include "bpe_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "mo/core/error.h"
#include "mo/tokenizer/utf8.h"

namespace mo::tok {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Match data is per thread: encode() is const and may run on many threads at once.
struct MatchData {
  pcre2_match_data* md = nullptr;
  MatchData() : md(pcre2_match_data_create(4, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(md); }
};

}  // namespace

struct BpeRegex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

std::string onig_to_pcre2(const std::string& pattern) {
  // Oniguruma's \s is the White_Space property; PCRE2's (with UCP) is \p{Z} plus \h and \v, which
  // adds U+180E. Spell out White_Space so both engines split the same way.
  static const std::string kSpaceSet =
      "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
  std::string out;
  out.reserve(pattern.size() + 32);
  int class_depth = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[i + 1];
      ++i;
      if (n == 's') {
        out += class_depth ? kSpaceSet : "[" + kSpaceSet + "]";
      } else if (n == 'S' && !class_depth) {
        out += "[^" + kSpaceSet + "]";
      } else {
        out += '\\';
        out += n;
      }
      continue;
    }
    if (c == '[') {
      ++class_depth;
      out += c;
      // A ']' right after '[' or '[^' is a literal in both syntaxes.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && class_depth) --class_depth;
    out += c;
  }
  return out;
}

BpeRegex::BpeRegex(const std::string& pattern, bool literal, const std::string& source)
    : impl_(std::make_unique<Impl>()), pattern_(pattern) {
  const std::string translated = literal ? pattern : onig_to_pcre2(pattern);
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  if (literal) options = PCRE2_LITERAL | PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), options, &err, &err_offset, nullptr);
  if (!impl_->code) {
    throw Error(source + ": pre-tokenizer regex '" + pattern + "' does not compile at offset " + std::to_string(err_offset) + ": " +
                pcre2_message(err));
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

BpeRegex::~BpeRegex() = default;

void BpeRegex::find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const {
  thread_local MatchData data;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  while (start <= text.size()) {
    int rc = pcre2_match(impl_->code, subject, text.size(), start, 0, data.md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_JIT, data.md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) throw Error("pre-tokenizer regex '" + pattern_ + "' failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    out.emplace_back(ov[0], ov[1]);
    if (ov[1] > ov[0]) {
      start = ov[1];
    } else {
      if (ov[1] >= text.size()) return;
      start = ov[1] + utf8_seq_len(static_cast<unsigned char>(text[ov[1]]));
    }
  }
}

}  // namespace mo::tok
