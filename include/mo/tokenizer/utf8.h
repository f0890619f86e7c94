#pragma once
// UTF-8 helpers shared by the tokenizers. Nothing here allocates except the functions returning strings.
#include <cstddef>
#include <string>
#include <string_view>

namespace mo::tok {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Length in bytes of the sequence a lead byte starts (1 for ASCII and for bytes that cannot start
// a sequence: continuation bytes, 0xC0/0xC1, 0xF5..0xFF).
std::size_t utf8_seq_len(unsigned char lead);

// Decodes the code point at `pos` and advances `pos` past it. An ill-formed sequence yields
// kReplacementChar and advances past its maximal ill-formed subpart (Unicode's "U+FFFD substitution of
// maximal subparts", what Rust's from_utf8_lossy and Python's errors="replace" do), at least one byte.
char32_t utf8_next(std::string_view s, std::size_t& pos);

// Like utf8_next but reports ill-formed input: returns false (pos advanced past the bad subpart).
bool utf8_next_valid(std::string_view s, std::size_t& pos, char32_t& cp);

void utf8_append(std::string& out, char32_t cp);
std::string utf8_encode(char32_t cp);

bool utf8_is_valid(std::string_view s);

// `s` with every ill-formed subpart replaced by U+FFFD; returns `s` unchanged when it is valid.
std::string utf8_sanitize(std::string_view s);

// Bytes at the end of `s` that start a UTF-8 character but do not finish it (0..3): a streaming
// decoder holds these back until the next bytes arrive.
std::size_t utf8_incomplete_tail(std::string_view s);

}  // namespace mo::tok
