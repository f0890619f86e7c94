// SentencePiece scores <-> BPE merges. A SentencePiece BPE model merges the adjacent pair whose
// result has the highest score; an HF BPE model merges the pair of lowest rank. Listing every split
// of every token by the token's score turns one into the other (transformers' generate_merges).
#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "export_internal.h"

namespace mo::tok::hfx {
namespace {

// For each token, the first id of the longest other token that is a proper prefix of it (-1: none).
// All the token's prefixes that are tokens lie on the chain this starts (a prefix of a prefix is a
// prefix), so every split is found without hashing the token's substrings: that costs time quadratic
// in the token's length, minutes for one 1 MB token. In sorted order a token's prefixes come before it
// and stay on the stack until a string that does not start with them; each string is pushed and
// popped once, so the whole pass reads every byte a bounded number of times.
std::vector<std::int32_t> longest_prefix_token(const std::vector<std::string_view>& tokens) {
  std::vector<std::int32_t> order(tokens.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return tokens[a] < tokens[b]; });
  std::vector<std::int32_t> parent(tokens.size(), -1), stack;
  for (const std::int32_t id : order) {
    const std::string_view t = tokens[id];
    while (!stack.empty() && !t.starts_with(tokens[stack.back()])) stack.pop_back();
    // A repeated string (lowest id first, by the stable sort) shares its first occurrence's chain.
    if (!stack.empty() && tokens[stack.back()].size() == t.size()) {
      parent[id] = parent[stack.back()];
      continue;
    }
    parent[id] = stack.empty() ? -1 : stack.back();
    stack.push_back(id);
  }
  return parent;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> spm_merges_from_scores(const std::vector<std::string>& tokens,
                                                                        const std::vector<float>& scores) {
  const std::vector<std::string_view> fwd(tokens.begin(), tokens.end());
  std::vector<std::string> reversed;
  reversed.reserve(tokens.size());
  for (const auto& t : tokens) reversed.emplace_back(t.rbegin(), t.rend());
  const std::vector<std::string_view> bwd(reversed.begin(), reversed.end());
  const std::vector<std::int32_t> prefix = longest_prefix_token(fwd), suffix = longest_prefix_token(bwd);

  struct Merge {
    std::int32_t left, right;  // token ids
    float score;               // of the merged token
    std::size_t left_chars, right_chars;
  };
  std::vector<Merge> merges;
  std::vector<Merge> local;
  std::vector<std::pair<std::size_t, std::int32_t>> lefts;  // (split byte, left id), longest left first
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const std::string_view t = tokens[id];
    const auto starts = utf8_char_starts(t);
    if (starts.size() < 2) continue;
    lefts.clear();
    for (std::int32_t p = prefix[id]; p >= 0; p = prefix[p]) lefts.emplace_back(tokens[p].size(), p);
    local.clear();
    // Suffixes come longest first, so their split bytes rise; the lefts, read from the back, rise too.
    auto l = lefts.rbegin();
    for (std::int32_t s = suffix[id]; s >= 0 && l != lefts.rend(); s = suffix[s]) {
      const std::size_t at = t.size() - tokens[s].size();
      while (l != lefts.rend() && l->first < at) ++l;
      if (l == lefts.rend() || l->first != at) continue;
      // Splits inside a character or before the first one are not splits of the string transformers sees.
      const auto k = static_cast<std::size_t>(std::lower_bound(starts.begin(), starts.end(), at) - starts.begin());
      if (k == 0 || k == starts.size() || starts[k] != at) continue;
      local.push_back({l->second, s, scores[id], k, starts.size() - k});
    }
    std::sort(local.begin(), local.end(),
              [](const Merge& a, const Merge& b) { return a.left != b.left ? a.left < b.left : a.right < b.right; });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  // Python's sorted(..., reverse=True) is stable: equal keys keep their order.
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
    return a.right_chars > b.right_chars;
  });

  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const auto& m : merges) out.emplace_back(tokens[m.left], tokens[m.right]);
  return out;
}

std::vector<float> spm_scores_from_merges(const std::vector<std::string>& tokens, const std::vector<std::int32_t>& types,
                                          const std::vector<std::pair<std::string, std::string>>& merges) {
  std::unordered_map<std::string_view, std::int32_t> id_of;
  id_of.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) id_of.emplace(tokens[i], static_cast<std::int32_t>(i));

  std::int32_t first_normal = -1;
  for (std::size_t i = 0; i < types.size() && first_normal < 0; ++i)
    if (types[i] == kTypeNormal) first_normal = static_cast<std::int32_t>(i);

  // Defaults as llama.cpp's converter writes them: SentencePiece's 0 for byte and control pieces,
  // -1000 for added (user-defined) and padding tokens.
  std::vector<float> scores(tokens.size(), 0.0f);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == kTypeNormal) scores[i] = -static_cast<float>(static_cast<std::int64_t>(i) - first_normal);
    if (types[i] == kTypeUserDefined || types[i] == kTypeUnused) scores[i] = -1000.0f;
  }

  // Merge results in rank order must score strictly decreasing, or llama.cpp would merge them in
  // another order than the HF model does.
  std::unordered_set<std::int32_t> seen;
  float prev = std::numeric_limits<float>::infinity();
  std::string joined;
  for (const auto& [left, right] : merges) {
    joined.assign(left).append(right);
    const auto it = id_of.find(joined);
    if (it == id_of.end() || types[it->second] != kTypeNormal || !seen.insert(it->second).second) continue;
    float s = scores[it->second];
    if (s >= prev) s = prev - 1.0f;
    scores[it->second] = s;
    prev = s;
  }
  return scores;
}

}  // namespace mo::tok::hfx
