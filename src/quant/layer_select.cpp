#include "mo/quant/layer_select.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "mo/core/error.h"

namespace mo::quant {

namespace {

constexpr const char* kForms =
    "expected a module name (model.layers.3.mlp.down_proj), a glob (*.down_proj, model.layers.31.*), a layer index or range "
    "(12, 29-31) or a range inside a name (model.layers.28-31.mlp.down_proj)";

// A layer index as written: at most 9 digits, so it always fits an int.
int index_of(const std::string& digits, const std::string& key, const std::string& text) {
  if (digits.size() > 9) throw UsageError(fmt::format("{}: '{}' has a layer index too large to be one; {}", key, text, kForms));
  return std::stoi(digits);
}

// Edit distance between `pattern` (wildcards left out, '?' matching any character) and the closest
// substring of `name`: how far a typo is from a name it was meant to match.
std::size_t substring_distance(const std::string& pattern, const std::string& name) {
  std::string p;
  for (char c : pattern)
    if (c != '*') p += c;
  std::vector<std::size_t> prev(name.size() + 1, 0), cur(name.size() + 1);  // row 0: a match may start anywhere
  for (std::size_t i = 1; i <= p.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= name.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (p[i - 1] == name[j - 1] || p[i - 1] == '?' ? 0 : 1);
      cur[j] = std::min({sub, prev[j] + 1, cur[j - 1] + 1});
    }
    std::swap(prev, cur);
  }
  return *std::min_element(prev.begin(), prev.end());
}

}  // namespace

bool glob_match(const std::string& p, const std::string& t) {
  // Iterative wildcard match with backtracking to the last '*'.
  std::size_t pi = 0, ti = 0, star = std::string::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
      ++pi;
      ++ti;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (star != std::string::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::string hf_linear_module(int layer, const char* linear_name) {
  const std::string n = linear_name;
  const bool attn = n == "q_proj" || n == "k_proj" || n == "v_proj" || n == "o_proj";
  return fmt::format("model.layers.{}.{}.{}", layer, attn ? "self_attn" : "mlp", n);
}

LayerSelector::LayerSelector(const std::vector<std::string>& patterns, const std::string& key) : key_(key) {
  static const std::regex whole(R"(^\s*(\d+)\s*(?:-\s*(\d+))?\s*$)");
  // Dot-separated parts of letters, digits, '_' and wildcards; one part may be a range FIRST-LAST.
  static const std::regex name(R"(^[A-Za-z0-9_*?]+(\.[A-Za-z0-9_*?]+)*$)");
  static const std::regex inner(R"(^((?:[A-Za-z0-9_*?]+\.)+)(\d+)-(\d+)((?:\.[A-Za-z0-9_*?]+)*)$)");
  for (const auto& text : patterns) {
    Pattern p;
    p.text = text;
    std::smatch m;
    if (text.empty()) throw UsageError(fmt::format("{}: an empty pattern; {}", key, kForms));
    if (std::regex_match(text, m, whole)) {
      p.first = index_of(m[1], key, text);
      p.last = m[2].matched ? index_of(m[2], key, text) : p.first;
    } else if (std::regex_match(text, m, inner)) {
      p.first = index_of(m[2], key, text);
      p.last = index_of(m[3], key, text);
      p.glob = m[1].str() + "#" + m[4].str();
    } else if (std::regex_match(text, name)) {
      p.glob = text;
    } else {
      throw UsageError(fmt::format("{}: '{}' is not a pattern; {}", key, text, kForms));
    }
    if (p.first > p.last) throw UsageError(fmt::format("{}: '{}' is an empty range; expected FIRST-LAST with FIRST <= LAST", key, text));
    patterns_.push_back(std::move(p));
  }
  used_.assign(patterns_.size(), false);
}

void LayerSelector::check_layer_count(int num_layers, const std::string& model) const {
  for (const Pattern& p : patterns_)
    if (p.last >= num_layers)
      throw UsageError(
          fmt::format("{}: '{}' reaches layer {}, but {} has {} layers (0-{})", key_, p.text, p.last, model, num_layers, num_layers - 1));
}

std::optional<std::string> LayerSelector::match(const std::string& module, int layer) const {
  if (!patterns_.empty()) seen_.emplace_back(module, layer);
  for (std::size_t i = 0; i < patterns_.size(); ++i) {
    const Pattern& p = patterns_[i];
    bool hit = false;
    if (p.glob.empty()) {
      hit = layer >= 0 && layer >= p.first && layer <= p.last;
    } else if (p.first >= 0) {
      if (layer >= p.first && layer <= p.last) {
        std::string g = p.glob;
        g.replace(g.find('#'), 1, std::to_string(layer));
        hit = glob_match(g, module);
      }
    } else {
      hit = glob_match(p.glob, module);
    }
    if (hit) {
      used_[i] = true;
      return p.text;
    }
  }
  return std::nullopt;
}

std::vector<std::string> LayerSelector::unused() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < patterns_.size(); ++i)
    if (!used_[i] && patterns_[i].text != "lm_head") out.push_back(patterns_[i].text);
  return out;
}

std::vector<std::string> LayerSelector::unused_warnings() const {
  std::vector<std::string> out;
  for (const std::string& text : unused()) {
    // Closest first; of one name in several layers only its closest (then lowest) layer is shown.
    std::map<std::string, std::pair<std::size_t, std::size_t>> best;  // shape -> (distance, order seen)
    for (std::size_t i = 0; i < seen_.size(); ++i) {
      const auto& [module, layer] = seen_[i];
      std::string shape = module;
      const std::string index = "." + std::to_string(layer) + ".";
      if (const auto at = shape.find(index); layer >= 0 && at != std::string::npos) shape.replace(at, index.size(), ".#.");
      const std::pair<std::size_t, std::size_t> rank{substring_distance(text, module), i};
      if (auto [it, fresh] = best.emplace(shape, rank); !fresh && rank < it->second) it->second = rank;
    }
    std::set<std::pair<std::size_t, std::size_t>> ranked;
    for (const auto& [shape, rank] : best) ranked.insert(rank);
    std::vector<std::string> closest;
    for (const auto& [distance, i] : ranked) {
      if (closest.size() == 3) break;
      closest.push_back(seen_[i].first);
    }
    out.push_back(closest.empty() ? fmt::format("{}: '{}' matched no module", key_, text)
                                  : fmt::format("{}: '{}' matched no module; the closest names: {}", key_, text, fmt::join(closest, ", ")));
  }
  return out;
}

}  // namespace mo::quant
