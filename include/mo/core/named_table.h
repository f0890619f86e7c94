#pragma once
// Lookups in a table of entries with a lower-case `name` (model presets, GPU presets).
#include <string>
#include <vector>

#include "mo/core/strings.h"

namespace mo {

// The entry whose name is `name` in any case, or nullptr.
template <typename Entry>
const Entry* find_by_name(const std::vector<Entry>& table, const std::string& name) {
  const std::string n = to_lower(name);
  for (const auto& e : table)
    if (e.name == n) return &e;
  return nullptr;
}

template <typename Entry>
std::vector<std::string> names_of(const std::vector<Entry>& table) {
  std::vector<std::string> out;
  for (const auto& e : table) out.push_back(e.name);
  return out;
}

}  // namespace mo
