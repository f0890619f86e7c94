#pragma once
// A compiled pre-tokenizer regex (PCRE2, UTF + Unicode properties, JIT when available), with the
// find-all loop the Split pre-tokenizers need.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mo::tok {

class BpeRegex {
 public:
  // `pattern` in Oniguruma syntax (what tokenizer.json and llama.cpp hold); `literal` matches it as
  // plain text. Throws Error naming `source` and the pattern when it does not compile.
  BpeRegex(const std::string& pattern, bool literal, const std::string& source);
  ~BpeRegex();
  BpeRegex(const BpeRegex&) = delete;
  BpeRegex& operator=(const BpeRegex&) = delete;

  // Appends the [begin, end) byte ranges of every non-overlapping match in `text`, left to right.
  // Ill-formed UTF-8 bytes never match. An empty match is reported (a split point) and the search
  // resumes one character later.
  void find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

// Oniguruma -> PCRE2 pattern differences that matter for tokenizer regexes (see the .cpp).
std::string onig_to_pcre2(const std::string& pattern);

}  // namespace mo::tok
