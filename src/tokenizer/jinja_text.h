#pragma once
// Python str semantics on UTF-8 strings: Python indexes, slices, strips and splits by code point
// and calls the Unicode whitespace set "whitespace"; the chat template interpreter does the same.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja_value.h"

namespace mo::tok::jinja {

// Code points of `s`; an invalid byte becomes one code point of its own value (never fails).
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view cps);
void append_utf8(std::string& out, char32_t cp);
// Number of code points (Python len()).
std::size_t utf8_length(std::string_view s);

// Python str.isspace() for one code point.
bool py_isspace(char32_t cp);
// str.strip/lstrip/rstrip: without `chars`, Unicode whitespace; with it, any of its code points.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) and str.rsplit; without `sep`, runs of whitespace and no empty parts.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit, bool from_right = false);
// str.replace(old, new, count); count < 0 replaces all.
// Throws kLimit (at `loc`) when the result would pass kMaxBytes.
std::string py_replace(const Loc& loc, std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count);
// str.upper/lower/title/capitalize/islower/isupper with the case pairs of Latin, Greek and Cyrillic
// (and ß -> SS); characters of other scripts count as uncased.
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);
bool py_islower(std::string_view s);
bool py_isupper(std::string_view s);

// Python repr(float): shortest round-trip digits, "1.0", "1e+20", "1e-05", "inf", "nan".
std::string py_float_repr(double v);
// Python repr(str): quotes chosen as Python does, control characters escaped.
std::string py_str_repr(std::string_view s);
// Python json.dumps of a string: ensure_ascii escapes everything above 0x7f as \uXXXX.
std::string json_quote(std::string_view s, bool ensure_ascii);

}  // namespace mo::tok::jinja
