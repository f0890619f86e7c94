#include "mo/bench/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mo/core/error.h"
#include "mo/core/strings.h"

namespace mo::bench {
namespace {

using nlohmann::json;

const std::vector<std::string> kRates = {"throughput", "request_throughput", "total_throughput", "goodput"};
const std::vector<std::string> kShown = {"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "itl_p50", "e2e_p50", "throughput", "goodput"};

bool known_metric(const std::string& m) {
  if (std::find(kRates.begin(), kRates.end(), m) != kRates.end()) return true;
  const auto us = m.find('_');
  if (us == std::string::npos) return false;
  const std::string base = m.substr(0, us), stat = m.substr(us + 1);
  const std::vector<std::string> bases = {"ttft", "tpot", "itl", "e2e"}, stats = {"mean", "median", "p50", "p90", "p95", "p99"};
  return std::find(bases.begin(), bases.end(), base) != bases.end() && std::find(stats.begin(), stats.end(), stat) != stats.end();
}

std::string level_key(const json& l) { return fmt::format("{}@{:g}", l.value("concurrency", 0), l.value("request_rate", 0.0)); }

void check_results(const json& j, const std::string& name) {
  if (!j.is_object() || !j.contains("levels") || !j["levels"].is_array())
    throw UsageError(fmt::format("{}: not a bench results file (no \"levels\" array); write one with bench --out", name));
}

}  // namespace

std::vector<RegressionLimit> parse_max_regression(const std::string& text) {
  std::vector<RegressionLimit> out;
  for (const std::string& item : split_trimmed(text)) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string metric = to_lower(item.substr(0, eq));
    if (eq == std::string::npos || !known_metric(metric))
      throw UsageError(
          fmt::format("--max-regression '{}': expected METRIC=PERCENT%, METRIC one of ttft|tpot|itl|e2e + "
                      "_mean|_p50|_p90|_p95|_p99, or {}",
                      item, join(kRates, ", ")));
    const std::string v = item.substr(eq + 1);
    char* end = nullptr;
    const double pct = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || std::string(end) != "%")
      throw UsageError(fmt::format("--max-regression '{}': the limit must be a percentage, e.g. {}=5% or throughput=-5%", item, metric));
    out.push_back({metric, pct});
  }
  return out;
}

double metric_value(const json& s, const std::string& metric) {
  if (metric == "throughput") return s.value("output_throughput", 0.0);
  if (metric == "request_throughput") return s.value("request_throughput", 0.0);
  if (metric == "total_throughput") return s.value("total_token_throughput", 0.0);
  if (metric == "goodput") return s.value("goodput", 0.0);
  const auto us = metric.find('_');
  std::string stat = metric.substr(us + 1);
  if (stat == "p50") stat = "median";
  const std::string key = metric.substr(0, us) + "_ms";
  if (!s.contains(key) || !s[key].contains(stat)) return 0;
  return s[key][stat].get<double>();
}

CompareResult compare_results(const json& base, const json& now, const std::vector<RegressionLimit>& limits, const std::string& base_name,
                              const std::string& new_name) {
  check_results(base, base_name);
  check_results(now, new_name);
  CompareResult r;
  int compared = 0;
  std::vector<std::string> metrics = kShown;
  for (const auto& l : limits)
    if (std::find(metrics.begin(), metrics.end(), l.metric) == metrics.end()) metrics.push_back(l.metric);
  r.table = fmt::format("{:>12} {:>20} {:>12} {:>12} {:>9} {:>8}  {}\n", "concurrency", "metric", "base", "new", "delta", "limit", "");
  for (const auto& bl : base["levels"]) {
    const json* nl = nullptr;
    for (const auto& l : now["levels"])
      if (level_key(l) == level_key(bl)) nl = &l;
    const std::string name = bl.value("request_rate", 0.0) > 0
                                 ? fmt::format("{}@{:g}/s", bl.value("concurrency", 0), bl.value("request_rate", 0.0))
                                 : std::to_string(bl.value("concurrency", 0));
    if (!nl) {
      r.notes.push_back(fmt::format("concurrency {} is in {} only", name, base_name));
      continue;
    }
    ++compared;
    for (const auto& m : metrics) {
      const double b = metric_value(bl["summary"], m), n = metric_value((*nl)["summary"], m);
      const double delta = b != 0 ? (n - b) / b * 100 : (n == 0 ? 0 : INFINITY);
      std::string limit = "", verdict = "";
      for (const auto& l : limits) {
        if (l.metric != m) continue;
        limit = fmt::format("{:+g}%", l.percent);
        const bool crossed = l.percent >= 0 ? delta > l.percent : delta < l.percent;
        verdict = crossed ? "REGRESSION" : "ok";
        r.regression = r.regression || crossed;
      }
      const std::string unit = m == "throughput" || m == "total_throughput"  ? " tok/s"
                               : m == "request_throughput" || m == "goodput" ? " req/s"
                                                                             : " ms";
      r.table += fmt::format("{:>12} {:>20} {:>12} {:>12} {:>+8.1f}% {:>8}  {}\n", name, m + unit, fmt::format("{:.2f}", b),
                             fmt::format("{:.2f}", n), delta, limit, verdict);
    }
  }
  for (const auto& l : now["levels"]) {
    bool found = false;
    for (const auto& bl : base["levels"]) found = found || level_key(l) == level_key(bl);
    if (!found) r.notes.push_back(fmt::format("concurrency {} is in {} only", l.value("concurrency", 0), new_name));
  }
  if (!limits.empty() && compared == 0) {
    r.notes.push_back("no concurrency level is in both files: the gate fails");
    r.regression = true;
  }
  return r;
}

}  // namespace mo::bench
