#include "bpe_bytes.h"

#include <array>

#include "mo/tokenizer/utf8.h"

namespace mo::tok {

namespace {

// Printable Latin-1 bytes map to themselves; the other 68 take U+0100 onwards in byte order.
struct ByteMap {
  std::array<char32_t, 256> to_cp{};
  std::array<std::string, 256> to_text;
  std::array<int, 0x144> from_cp{};  // every mapped code point is below U+0144

  ByteMap() {
    from_cp.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? static_cast<char32_t>(b) : next++;
      to_text[b] = utf8_encode(to_cp[b]);
      from_cp[to_cp[b]] = b;
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_mapped(unsigned char b) { return byte_map().to_text[b]; }

int mapped_to_byte(char32_t cp) { return cp < 0x144 ? byte_map().from_cp[cp] : -1; }

std::string bytes_to_mapped(std::string_view raw) {
  const ByteMap& map = byte_map();
  std::string out;
  out.reserve(raw.size() * 2);
  for (const char c : raw) out += map.to_text[static_cast<unsigned char>(c)];
  return out;
}

bool mapped_to_bytes(std::string_view mapped, std::string& out) {
  out.clear();
  out.reserve(mapped.size());
  for (std::size_t pos = 0; pos < mapped.size();) {
    char32_t cp;
    if (!utf8_next_valid(mapped, pos, cp)) return false;
    const int b = mapped_to_byte(cp);
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
  }
  return true;
}

}  // namespace mo::tok
