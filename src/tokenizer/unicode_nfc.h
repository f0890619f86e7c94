#pragma once
#include <string>
#include <string_view>

namespace mo::tok {

// Unicode Normalization Form C (canonical decomposition, then canonical composition), as the HF
// "NFC" normalizer applies it. Ill-formed UTF-8 bytes are passed through unchanged.
std::string nfc(std::string_view text);

// True when nfc(text) == text is certain without running it (no byte that can start a character
// from U+0300 up, the first one that NFC may change).
bool nfc_trivially_stable(std::string_view text);

}  // namespace mo::tok
