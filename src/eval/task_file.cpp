#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mo/core/error.h"
#include "mo/core/file_read.h"
#include "mo/eval/tasks.h"

namespace mo::eval {
namespace {

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw UsageError(fmt::format("{}: missing field \"{}\"", where, key));
  if (!it->is_string()) throw UsageError(fmt::format("{}: field \"{}\" must be a string", where, key));
  return it->get<std::string>();
}

std::vector<std::string> string_list(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->empty())
    throw UsageError(fmt::format("{}: field \"{}\" must be a non-empty list of strings", where, key));
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string()) throw UsageError(fmt::format("{}: field \"{}\" must be a non-empty list of strings", where, key));
    out.push_back(v.get<std::string>());
  }
  return out;
}

int gold_field(const nlohmann::json& j, std::size_t n_choices, const std::string& where) {
  auto it = j.find("gold");
  if (it == j.end()) throw UsageError(fmt::format("{}: missing field \"gold\"", where));
  if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() >= static_cast<long long>(n_choices))
    throw UsageError(fmt::format("{}: field \"gold\" must be an index between 0 and {}", where, n_choices - 1));
  return static_cast<int>(it->get<long long>());
}

TaskItem parse_item(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw UsageError(fmt::format("{}: expected a JSON object", where));
  TaskItem item;
  if (j.contains("choices")) {
    const std::string query = string_field(j, "query", where);
    for (const auto& c : string_list(j, "choices", where)) {
      item.contexts.push_back(query);
      item.continuations.push_back(" " + c);
      item.choices.push_back(c);
    }
    item.gold = gold_field(j, item.continuations.size(), where);
  } else if (j.contains("context_options")) {
    const std::string cont = string_field(j, "continuation", where);
    for (const auto& c : string_list(j, "context_options", where)) {
      item.contexts.push_back(c);
      item.continuations.push_back(" " + cont);
      item.choices.push_back(c);
    }
    item.gold = gold_field(j, item.contexts.size(), where);
  } else if (j.contains("context")) {
    item.contexts.push_back(string_field(j, "context", where));
    item.continuations.push_back(" " + string_field(j, "continuation", where));
    item.choices.push_back(item.continuations.back().substr(1));
    item.completion = true;
  } else {
    throw UsageError(
        fmt::format("{}: expected the fields query/choices/gold, context_options/continuation/gold or context/continuation", where));
  }
  return item;
}

}  // namespace

TaskFile load_task_file(const std::string& path) {
  std::istringstream in(read_regular_file(path, "task file", 4096 * kMiB));
  TaskFile t;
  t.path = path;
  t.name = std::filesystem::path(path).stem().string();
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number like 1e99999
      throw UsageError(fmt::format("{}: not valid JSON ({})", where, e.what()));
    }
    t.items.push_back(parse_item(j, where));
    if (!t.items.empty() && t.items.front().completion != t.items.back().completion)
      throw UsageError(fmt::format("{}: mixes completion items (context/continuation) with multiple-choice items", where));
  }
  if (t.items.empty()) throw UsageError(fmt::format("{}: no items", path));
  return t;
}

double binomial_stderr(double p, std::int64_t n) {
  if (n < 2) return 0;
  return std::sqrt(p * (1 - p) / static_cast<double>(n - 1));
}

}  // namespace mo::eval
