#include "mo/quant/layer_select.h"

#include <fmt/format.h>

#include <regex>

#include "mo/core/error.h"

namespace mo::quant {

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

LayerSelector::LayerSelector(const std::vector<std::string>& patterns, const std::string& key) {
  static const std::regex whole(R"(^\s*(\d+)\s*(?:-\s*(\d+))?\s*$)");
  static const std::regex inner(R"(^(.*\.)(\d+)-(\d+)(\..*|)$)");
  for (const auto& text : patterns) {
    Pattern p;
    p.text = text;
    std::smatch m;
    if (std::regex_match(text, m, whole)) {
      p.first = std::stoi(m[1]);
      p.last = m[2].matched ? std::stoi(m[2]) : p.first;
    } else if (std::regex_match(text, m, inner)) {
      p.first = std::stoi(m[2]);
      p.last = std::stoi(m[3]);
      p.glob = m[1].str() + "#" + m[4].str();
    } else if (text.empty()) {
      throw UsageError(fmt::format("{}: an empty pattern; expected a module name, a glob or a layer range like 29-31", key));
    } else {
      p.glob = text;
    }
    if (p.first > p.last) throw UsageError(fmt::format("{}: '{}' is an empty range; expected FIRST-LAST with FIRST <= LAST", key, text));
    patterns_.push_back(std::move(p));
  }
  used_.assign(patterns_.size(), false);
}

std::optional<std::string> LayerSelector::match(const std::string& module, int layer) const {
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
    if (!used_[i]) out.push_back(patterns_[i].text);
  return out;
}

}  // namespace mo::quant
