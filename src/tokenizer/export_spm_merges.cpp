// SentencePiece scores <-> BPE merges. A SentencePiece BPE model merges the adjacent pair whose
// result has the highest score; an HF BPE model merges the pair of lowest rank. Listing every split
// of every token by the token's score turns one into the other (transformers' generate_merges).
#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "export_internal.h"

namespace mo::tok::hfx {

std::vector<std::pair<std::string, std::string>> spm_merges_from_scores(const std::vector<std::string>& tokens,
                                                                        const std::vector<float>& scores) {
  std::unordered_map<std::string_view, std::int32_t> id_of;
  id_of.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) id_of.emplace(tokens[i], static_cast<std::int32_t>(i));

  struct Merge {
    std::int32_t left, right;  // token ids
    float score;               // of the merged token
    std::size_t left_chars, right_chars;
  };
  std::vector<Merge> merges;
  std::vector<Merge> local;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const std::string_view t = tokens[id];
    const auto starts = utf8_char_starts(t);
    local.clear();
    for (std::size_t k = 1; k < starts.size(); ++k) {
      const auto l = id_of.find(t.substr(0, starts[k]));
      const auto r = id_of.find(t.substr(starts[k]));
      if (l != id_of.end() && r != id_of.end()) local.push_back({l->second, r->second, scores[id], k, starts.size() - k});
    }
    std::stable_sort(local.begin(), local.end(),
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
