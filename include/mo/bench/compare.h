#pragma once
// `bench compare BASE NEW`: side-by-side summary of two results files with deltas, and the CI gate.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mo::bench {

// A limit on the relative change of one metric. Metrics: ttft|tpot|itl|e2e with _mean, _p50 (= median),
// _p90, _p95, _p99; throughput (output tokens/s), request_throughput, total_throughput, goodput.
// A positive limit is the largest allowed increase ("tpot_p50=5%"), a negative one the largest allowed
// decrease ("throughput=-5%").
struct RegressionLimit {
  std::string metric;
  double percent = 0;
};
// Throws UsageError naming --max-regression on an unknown metric or a value without '%'.
std::vector<RegressionLimit> parse_max_regression(const std::string& text);

struct CompareResult {
  std::string table;               // one row per level and metric
  bool regression = false;         // some limit was crossed
  std::vector<std::string> notes;  // levels present in only one file
};

// Levels are matched by concurrency and request rate. Throws UsageError naming `base_name`/`new_name`
// when a file is not a bench results file.
CompareResult compare_results(const nlohmann::json& base, const nlohmann::json& now, const std::vector<RegressionLimit>& limits,
                              const std::string& base_name, const std::string& new_name);

// The summary value of `metric` in one level's summary object.
double metric_value(const nlohmann::json& summary, const std::string& metric);

}  // namespace mo::bench
