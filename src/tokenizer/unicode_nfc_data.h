#pragma once
// Unicode tables for NFC, generated into unicode_nfc_data.cpp by unicode_nfc_gen.py. Each table is
// sorted by its first field for binary search.
#include <cstddef>
#include <cstdint>

namespace mo::tok::nfc_data {

struct CccRange {
  char32_t first, last;
  std::uint8_t ccc;  // canonical combining class, never 0 here
};
struct Decomp {
  char32_t cp;
  std::uint16_t offset;  // into kDecompPool
  std::uint8_t length;   // full (recursive) canonical decomposition
};
struct Compose {
  char32_t first, second, composite;
};

extern const char* const kUnicodeVersion;
extern const CccRange kCcc[];
extern const std::size_t kCccCount;
extern const char32_t kDecompPool[];
extern const Decomp kDecomp[];
extern const std::size_t kDecompCount;
extern const Compose kCompose[];
extern const std::size_t kComposeCount;

}  // namespace mo::tok::nfc_data
