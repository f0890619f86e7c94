#include "mo/report/decision_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mo/core/error.h"
#include "mo/core/file_read.h"

namespace mo::report {

DecisionSummary summarize_decisions(const std::string& path) {
  std::istringstream in(read_regular_file(path, "decision log", 1024 * kMiB));
  DecisionSummary s;
  s.path = path;
  std::vector<DecisionRow> with_cosine;
  double cos_sum = 0;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("module") || !j["module"].is_string())
      throw UsageError(fmt::format("{}:{}: expected a JSON object with a \"module\" string", path, n));
    DecisionRow r;
    r.module = j["module"].get<std::string>();
    r.format = j.value("format", std::string("?"));
    r.requested = j.value("requested", r.format);
    r.reason = j.value("reason", std::string());
    r.bytes = j.value("bytes", std::uint64_t{0});
    if (j.contains("cosine") && j["cosine"].is_number()) r.cosine = j["cosine"].get<double>();
    ++s.modules;
    s.by_format[r.format]++;
    s.bytes_by_format[r.format] += r.bytes;
    if (!r.reason.empty() || r.format != r.requested) s.changed.push_back(r);
    if (r.cosine >= 0) {
      cos_sum += r.cosine;
      with_cosine.push_back(r);
    }
  }
  if (!with_cosine.empty()) {
    s.mean_cosine = cos_sum / static_cast<double>(with_cosine.size());
    std::stable_sort(with_cosine.begin(), with_cosine.end(),
                     [](const DecisionRow& a, const DecisionRow& b) { return a.cosine < b.cosine; });
    with_cosine.resize(std::min<std::size_t>(5, with_cosine.size()));
    s.lowest_cosine = with_cosine;
  }
  return s;
}

}  // namespace mo::report
