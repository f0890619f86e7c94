#include "mo/serve/metrics.h"

#include <fmt/format.h>

namespace mo::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::string s = fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    s += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  s += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
  return s;
}

namespace {

std::string metric(const char* type, const std::string& name, const std::string& help, double value) {
  return fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
}

}  // namespace

std::string ServeMetrics::prometheus() const {
  const double hit_rate = prefix_cache_queries > 0 ? static_cast<double>(prefix_cache_hits) / prefix_cache_queries : 0;
  std::string s;
  s += metric("gauge", "mo:num_requests_running", "Sequences in the running batch.", requests_running);
  s += metric("gauge", "mo:num_requests_waiting", "Sequences waiting to be scheduled (new or preempted).", requests_waiting);
  s += metric("gauge", "mo:kv_blocks_used", "KV-cache blocks held by sequences.", kv_blocks_used);
  s += metric("gauge", "mo:kv_blocks_free", "KV-cache blocks free (cached prefixes included).", kv_blocks_free);
  s += metric("gauge", "mo:kv_cache_usage_perc", "Fraction of KV-cache blocks in use.",
              kv_blocks_used + kv_blocks_free > 0 ? static_cast<double>(kv_blocks_used) / (kv_blocks_used + kv_blocks_free) : 0);
  s += metric("counter", "mo:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
              static_cast<double>(prefix_cache_queries));
  s += metric("counter", "mo:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", static_cast<double>(prefix_cache_hits));
  s += metric("gauge", "mo:prefix_cache_hit_rate", "prefix_cache_hits_total / prefix_cache_queries_total.", hit_rate);
  s += metric("counter", "mo:prompt_tokens_total", "Prompt tokens of finished requests.", static_cast<double>(prompt_tokens_total));
  s += metric("counter", "mo:generation_tokens_total", "Generated tokens.", static_cast<double>(generation_tokens_total));
  s += metric("counter", "mo:request_success_total", "Sequences finished (stop or length).", static_cast<double>(requests_finished_total));
  s += metric("counter", "mo:num_preemptions_total", "Sequences preempted for lack of KV blocks.", static_cast<double>(preemptions_total));
  s += time_to_first_token.render("mo:time_to_first_token_seconds", "Arrival to first output token.");
  s += time_per_output_token.render("mo:time_per_output_token_seconds", "Time between output tokens of a sequence.");
  s += e2e_request_latency.render("mo:e2e_request_latency_seconds", "Arrival to last output token.");
  return s;
}

}  // namespace mo::serve
