#pragma once
// Per-request samples and their aggregation: latency percentiles, throughput, goodput under SLOs.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mo::bench {

struct RequestSample {
  bool ok = false;
  std::string error;    // failure reason when !ok
  double start_s = 0;   // send time, seconds after the level started
  double ttft_ms = -1;  // to the first chunk with text; -1 when not streamed
  double e2e_ms = 0;
  double tpot_ms = -1;          // (e2e - ttft) / (output_tokens - 1); -1 when undefined
  std::vector<double> itl_ms;   // one value per output token after the first chunk's
  long long input_tokens = 0;   // usage.prompt_tokens (or the requested length when absent)
  long long output_tokens = 0;  // usage.completion_tokens (or the chunk count when absent)
  bool usage_reported = false;  // token counts came from the server's usage
  int chunks = 0;               // SSE chunks carrying text
};

struct Stats {
  double mean = 0, median = 0, p90 = 0, p95 = 0, p99 = 0, min = 0, max = 0;
  long long count = 0;
};
// Linear-interpolated percentiles (numpy's default), so small runs read like other tools'.
Stats compute_stats(std::vector<double> values);
double percentile_sorted(const std::vector<double>& sorted, double q);

// --slo "ttft=500ms,tpot=50ms": limits in ms on ttft, tpot, itl (every token's), e2e.
struct Slo {
  std::map<std::string, double> limits_ms;
  bool empty() const { return limits_ms.empty(); }
  bool met_by(const RequestSample& s) const;
};
// Throws UsageError naming the flag on an unknown metric, a missing unit or a bad number.
Slo parse_slo(const std::string& text);

struct LevelSummary {
  double duration_s = 0;  // first send to last completion
  long long completed = 0, failed = 0, cancelled = 0;
  double request_throughput = 0;      // completed requests/s
  double output_throughput = 0;       // output tokens/s
  double total_token_throughput = 0;  // (input + output) tokens/s
  double goodput = 0;                 // requests/s meeting every SLO (= request_throughput without SLOs)
  long long good = 0;
  int peak_concurrency = 0;
  long long input_tokens = 0, output_tokens = 0;
  bool usage_reported = true;  // every successful request had usage
  Stats ttft_ms, tpot_ms, itl_ms, e2e_ms, input_len, output_len;
  std::map<std::string, long long> failures;  // reason -> count
};
LevelSummary summarize(const std::vector<RequestSample>& samples, double duration_s, int peak_concurrency, const Slo& slo);

nlohmann::json to_json(const Stats& s);
nlohmann::json to_json(const LevelSummary& s);
nlohmann::json to_json(const RequestSample& s);

}  // namespace mo::bench
