#include "unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "mo/tokenizer/utf8.h"
#include "unicode_nfc_data.h"

namespace mo::tok {

namespace {

using namespace nfc_data;

// Hangul syllables decompose and compose arithmetically (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// Code points are kept as char32_t; an ill-formed byte is carried as 0x80000000 | byte so it comes
// back out unchanged (ccc 0, composes with nothing).
constexpr char32_t kRawByteFlag = 0x80000000u;

int ccc(char32_t cp) {
  if (cp < 0x300 || (cp & kRawByteFlag)) return 0;
  const CccRange* end = kCcc + kCccCount;
  const CccRange* it = std::upper_bound(kCcc, end, cp, [](char32_t c, const CccRange& r) { return c < r.first; });
  if (it == kCcc) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp >= 0xC0 && !(cp & kRawByteFlag)) {
    const Decomp* end = kDecomp + kDecompCount;
    const Decomp* it = std::lower_bound(kDecomp, end, cp, [](const Decomp& d, char32_t c) { return d.cp < c; });
    if (it != end && it->cp == cp) {
      out.insert(out.end(), kDecompPool + it->offset, kDecompPool + it->offset + it->length);
      return;
    }
  }
  out.push_back(cp);
}

// The primary composite of a pair, or 0.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount) return a + (b - kTBase);
  const Compose* end = kCompose + kComposeCount;
  const Compose* it = std::lower_bound(kCompose, end, std::pair{a, b}, [](const Compose& c, std::pair<char32_t, char32_t> k) {
    return c.first < k.first || (c.first == k.first && c.second < k.second);
  });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

bool nfc_trivially_stable(std::string_view text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) >= 0xCC) return false;
  return true;
}

namespace {

std::string nfc_segment(std::string_view text) {
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t start = pos;
    char32_t cp;
    if (utf8_next_valid(text, pos, cp)) {
      decompose(cp, cps);
    } else {
      for (std::size_t i = start; i < pos; ++i) cps.push_back(kRawByteFlag | static_cast<unsigned char>(text[i]));
    }
  }

  // Canonical ordering: a stable sort of each run of non-starters by combining class.
  for (std::size_t i = 0; i < cps.size();) {
    if (ccc(cps[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < cps.size() && ccc(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j, [](char32_t a, char32_t b) { return ccc(a) < ccc(b); });
    i = j;
  }

  // Canonical composition: C joins the last starter S unless a character between them is a starter or
  // has a combining class >= C's (C is "blocked").
  std::vector<char32_t> out;
  out.reserve(cps.size());
  std::ptrdiff_t starter = -1;
  int last_cc = -1;  // class of the last character kept after the starter; -1 when none
  for (const char32_t c : cps) {
    const int cc = ccc(c);
    if (starter >= 0 && !(last_cc != -1 && (last_cc == 0 || last_cc >= cc))) {
      if (const char32_t comp = compose(out[starter], c)) {
        out[starter] = comp;
        continue;
      }
    }
    if (cc == 0) {
      starter = static_cast<std::ptrdiff_t>(out.size());
      last_cc = -1;
    } else {
      last_cc = cc;
    }
    out.push_back(c);
  }

  std::string result;
  result.reserve(text.size());
  for (const char32_t c : out) {
    if (c & kRawByteFlag)
      result.push_back(static_cast<char>(c & 0xFF));
    else
      utf8_append(result, c);
  }
  return result;
}

bool is_ascii(char c) { return static_cast<unsigned char>(c) < 0x80; }

}  // namespace

std::string nfc(std::string_view text) {
  if (nfc_trivially_stable(text)) return std::string(text);
  // An ASCII character is a starter that nothing composes onto and reordering never crosses, so NFC
  // works on each stretch between ASCII characters alone: only stretches with a byte >= 0xCC change.
  std::string out;
  out.reserve(text.size());
  std::size_t done = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (static_cast<unsigned char>(text[i]) < 0xCC) continue;
    std::size_t begin = i;
    while (begin > done && !is_ascii(text[begin])) --begin;
    std::size_t end = i + 1;
    while (end < text.size() && !is_ascii(text[end])) ++end;
    out.append(text.substr(done, begin - done));
    out += nfc_segment(text.substr(begin, end - begin));
    done = end;
    i = end - 1;
  }
  out.append(text.substr(done));
  return out;
}

}  // namespace mo::tok
