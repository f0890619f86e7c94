#include "mo/core/strings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace mo {

std::size_t levenshtein(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  std::string w = to_lower(word);
  std::replace(w.begin(), w.end(), '-', '_');
  for (const auto& c : candidates) {
    std::string lc = to_lower(c);
    std::replace(lc.begin(), lc.end(), '-', '_');
    // A candidate the word abbreviates ("gpu_mem" for "gpu_memory") is a likely intent even when far in edits.
    std::size_t d = levenshtein(w, lc);
    if (d > 0 && w.size() >= 4 && lc.rfind(w, 0) == 0) d = 1;
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> split_trimmed(std::string_view text, char sep) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t at = text.find(sep, start);
    out.push_back(trim(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start)));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::string format_bytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = std::fabs(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (bytes < 0) v = -v;
  if (u == 0) return fmt::format("{:.0f} B", v);
  return fmt::format("{:.2f} {}", v, units[u]);
}

std::string format_count(long long n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string shown_name(std::string_view name) {
  constexpr std::size_t kMaxShown = 80;
  std::string out;
  for (std::size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    const unsigned char c = name[i];
    out += (c < 0x20 || c == 0x7f) ? fmt::format("\\x{:02x}", c) : std::string(1, static_cast<char>(c));
  }
  if (name.size() > kMaxShown) out += fmt::format("... ({} bytes)", name.size());
  return out;
}

}  // namespace mo
