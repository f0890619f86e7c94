#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mo {

// Edit distance, for "did you mean" suggestions.
std::size_t levenshtein(std::string_view a, std::string_view b);
// The candidate closest to `word` when it is close enough to be a likely typo.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);
// "a, b, c" — for error messages that list what is allowed.
std::string join(const std::vector<std::string>& items, std::string_view sep = ", ");
std::string to_lower(std::string_view s);
// Without leading and trailing whitespace.
std::string trim(std::string_view s);
// "a, b,,c" split at `sep`, each item trimmed; empty items are kept (callers decide whether they are errors).
std::vector<std::string> split_trimmed(std::string_view text, char sep = ',');
// Human-readable bytes with a binary prefix: "6.84 GiB", "800.0 KiB".
std::string format_bytes(double bytes);
// Thousands separators: 524288 -> "524,288".
std::string format_count(long long n);
// A name from a file (key, tensor, token) as it appears in messages: control bytes escaped (a corrupt
// name may hold NULs, which would cut what() short) and long names shortened ("xxx... (1000000 bytes)").
std::string shown_name(std::string_view name);

}  // namespace mo
