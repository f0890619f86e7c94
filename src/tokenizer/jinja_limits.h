#pragma once
// Bounds on what a chat template may do, so that a hostile template fails with a clear error instead of
// overflowing the stack, running forever or exhausting memory. Real templates stay far below them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "jinja_value.h"

namespace mo::tok::jinja {

inline constexpr int kMaxNesting = 200;               // brackets, unary operators and tags inside each other
inline constexpr int kMaxExprNodes = 2000;            // parts of one {{ }} or {% %} expression (left-deep chains)
inline constexpr std::int64_t kMaxSteps = 2'000'000;  // expressions evaluated + loop iterations in one render
inline constexpr std::size_t kMaxBytes = 64u << 20;   // any string, the rendered output included
inline constexpr std::size_t kMaxItems = 1u << 20;    // any list
inline constexpr std::int64_t kMaxIndent = 1024;      // tojson(indent=) and indent(width)

// Throws kLimit when a string of `bytes` would pass kMaxBytes.
inline void check_bytes(std::size_t bytes, const Loc& loc) {
  if (bytes > kMaxBytes)
    fail(ChatTemplateError::Kind::kLimit, loc,
         "a string longer than " + std::to_string(kMaxBytes >> 20) + " MiB (the chat template size limit)");
}
inline void check_items(std::size_t items, const Loc& loc) {
  if (items > kMaxItems)
    fail(ChatTemplateError::Kind::kLimit, loc,
         "a list of more than " + std::to_string(kMaxItems) + " items (the chat template size limit)");
}

// A width or indent argument, refused past kMaxIndent rather than rendered differently from jinja2.
inline std::int64_t check_width(std::int64_t width, const Loc& loc) {
  if (width > kMaxIndent)
    fail(ChatTemplateError::Kind::kLimit, loc,
         "an indent or width of " + std::to_string(width) + " (at most " + std::to_string(kMaxIndent) + ")");
  return width;
}

}  // namespace mo::tok::jinja
