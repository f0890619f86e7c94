#pragma once
// Server metrics in Prometheus' text exposition format (GET /metrics). Names follow vLLM's where
// there is one, with our prefix: mo:num_requests_running, mo:kv_blocks_used, mo:time_to_first_token_seconds.
#include <cstdint>
#include <string>
#include <vector>

namespace mo::serve {

// Cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // "# HELP", "# TYPE", then name_bucket{le=...}, name_sum and name_count lines.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bound, not cumulative; one more for +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

struct ServeMetrics {
  // Gauges, set at each scheduler step.
  int requests_running = 0;  // sequences in the running batch
  int requests_waiting = 0;  // sequences queued (new or preempted)
  int kv_blocks_used = 0;
  int kv_blocks_free = 0;
  // Counters.
  std::int64_t prefix_cache_queries = 0;  // prompt tokens looked up
  std::int64_t prefix_cache_hits = 0;     // of those, found cached
  std::int64_t prompt_tokens_total = 0;
  std::int64_t generation_tokens_total = 0;
  std::int64_t requests_finished_total = 0;
  std::int64_t preemptions_total = 0;
  Histogram time_to_first_token{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram time_per_output_token{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
  Histogram e2e_request_latency{{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}};

  std::string prometheus() const;
};

}  // namespace mo::serve
