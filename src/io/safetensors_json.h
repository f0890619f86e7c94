#pragma once
// Internal to the safetensors reader: a pull parser over the JSON header that reports each problem
// with its byte offset in the file. It never recurses (nesting depth is a counter with a limit), so
// a crafted header cannot exhaust the stack, and it keeps integers exact up to 2^64 - 1.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mo::st::detail {

// serde_json's default recursion limit, which the reference uses.
inline constexpr int kMaxJsonDepth = 128;

// Position of the first byte that is not valid UTF-8 by Rust's str::from_utf8 rules (no overlong
// forms, no surrogates, nothing above U+10FFFF), or npos.
std::size_t invalid_utf8_at(std::string_view s);

// `s` in single quotes for an error message: control characters as \xNN so the message stays on one
// line, and cut after 120 bytes (at a character boundary) so a corrupt name cannot flood it.
std::string quote(std::string_view s);

class JsonCursor {
 public:
  // `text` (valid UTF-8) is the header; it starts at byte `base` of the file `path`.
  JsonCursor(const std::string& path, std::string_view text, std::size_t base) : path_(path), text_(text), base_(base) {}

  // File offset of the next token, after whitespace.
  std::size_t offset();
  // The next non-whitespace character, or '\0' at the end of the text.
  char peek();
  // Consumes `c` when it is the next token.
  bool consume(char c);
  // Fails with "<context>: expected <what>, got <next token>" unless `c` is next.
  void expect(char c, std::string_view what, std::string_view context);
  std::string read_string(std::string_view context);
  std::uint64_t read_uint(std::string_view context);
  void read_null(std::string_view context);
  // Skips any JSON value; `depth` is the number of containers already open around it.
  void skip_value(int depth, std::string_view context);
  // Only whitespace may follow the top-level value.
  void expect_end();

  // Describes the next token for an error message: "a string", "an array", "'x'", ...
  std::string describe_next();
  [[noreturn]] void fail(std::size_t file_offset, const std::string& message) const;

 private:
  void skip_ws();
  void skip_number(std::string_view context);
  void skip_literal(std::string_view context);
  std::size_t at() const { return base_ + pos_; }

  const std::string& path_;
  std::string_view text_;
  std::size_t base_;
  std::size_t pos_ = 0;
};

}  // namespace mo::st::detail
