#pragma once
// String helpers of the SentencePiece tokenizer (UTF-8 itself is in mo/tokenizer/utf8.h).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "spm_tokenizer.h"

namespace mo::tok::spm {

std::string replace_all(std::string_view s, std::string_view from, std::string_view to);
std::string join_with(const std::vector<std::string>& parts, std::string_view sep);

// C isspace() in the "C" locale, as llama.cpp uses for lstrip/rstrip of special tokens.
bool is_ascii_space(char c);
// Bytes of Unicode White_Space (Rust char::is_whitespace) at the end / start of `s`.
std::size_t trailing_whitespace(std::string_view s);
std::size_t leading_whitespace(std::string_view s);
// Whether a word character (regex \w) ends / starts `s`; non-ASCII letters are approximated as every
// non-whitespace code point above U+007F.
bool ends_with_word_char(std::string_view s);
bool starts_with_word_char(std::string_view s);

// Runs tokenizers' decoder steps over the list of token strings.
std::vector<std::string> apply_decoder(const std::vector<HfDecodeStep>& steps, std::vector<std::string> tokens);

}  // namespace mo::tok::spm
