#pragma once
// GPT-2's reversible byte <-> character map: every byte becomes a printable character (' ' -> 'Ġ',
// '\n' -> 'Ċ') so byte-level vocabularies can be stored as text.
#include <string>
#include <string_view>

namespace mo::tok {

// The UTF-8 text of the character byte `b` maps to.
const std::string& byte_to_mapped(unsigned char b);
// The byte a mapped character stands for, or -1 when `cp` is not one of the 256 characters.
int mapped_to_byte(char32_t cp);

std::string bytes_to_mapped(std::string_view raw);
// Decodes mapped text back to bytes; false (and `out` unspecified) when a character is not in the map.
bool mapped_to_bytes(std::string_view mapped, std::string& out);

}  // namespace mo::tok
