#include "mo/bench/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mo/core/error.h"
#include "mo/core/strings.h"

namespace mo::bench {

double percentile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

Stats compute_stats(std::vector<double> v) {
  Stats s;
  s.count = static_cast<long long>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.median = percentile_sorted(v, 50);
  s.p90 = percentile_sorted(v, 90);
  s.p95 = percentile_sorted(v, 95);
  s.p99 = percentile_sorted(v, 99);
  s.min = v.front();
  s.max = v.back();
  return s;
}

Slo parse_slo(const std::string& text) {
  Slo slo;
  for (const std::string& item : split_trimmed(text)) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string key = to_lower(item.substr(0, eq));
    if (eq == std::string::npos || (key != "ttft" && key != "tpot" && key != "itl" && key != "e2e"))
      throw UsageError(fmt::format("--slo '{}': expected METRIC=VALUE with METRIC one of ttft, tpot, itl, e2e (e.g. ttft=500ms)", item));
    const std::string value = item.substr(eq + 1);
    char* end = nullptr;
    const double x = std::strtod(value.c_str(), &end);
    const std::string unit = end ? std::string(end) : "";
    if (end == value.c_str() || !(x > 0) || (unit != "ms" && unit != "s"))
      throw UsageError(fmt::format("--slo '{}': expected a positive number with a unit, ms or s (e.g. {}=500ms)", item, key));
    slo.limits_ms[key] = unit == "s" ? x * 1000 : x;
  }
  return slo;
}

bool Slo::met_by(const RequestSample& s) const {
  if (!s.ok) return false;
  for (const auto& [key, limit] : limits_ms) {
    if (key == "ttft" && (s.ttft_ms < 0 || s.ttft_ms > limit)) return false;
    if (key == "tpot" && s.tpot_ms > limit) return false;
    if (key == "e2e" && s.e2e_ms > limit) return false;
    if (key == "itl" && std::any_of(s.itl_ms.begin(), s.itl_ms.end(), [lim = limit](double x) { return x > lim; })) return false;
  }
  return true;
}

LevelSummary summarize(const std::vector<RequestSample>& samples, double duration_s, int peak_concurrency, const Slo& slo) {
  LevelSummary s;
  s.duration_s = duration_s;
  s.peak_concurrency = peak_concurrency;
  std::vector<double> ttft, tpot, itl, e2e, in_len, out_len;
  for (const auto& r : samples) {
    if (!r.ok) {
      if (r.error == "cancelled") {
        ++s.cancelled;
      } else {
        ++s.failed;
        ++s.failures[r.error];
      }
      continue;
    }
    ++s.completed;
    s.input_tokens += r.input_tokens;
    s.output_tokens += r.output_tokens;
    s.usage_reported = s.usage_reported && r.usage_reported;
    if (r.ttft_ms >= 0) ttft.push_back(r.ttft_ms);
    if (r.tpot_ms >= 0) tpot.push_back(r.tpot_ms);
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
    e2e.push_back(r.e2e_ms);
    in_len.push_back(static_cast<double>(r.input_tokens));
    out_len.push_back(static_cast<double>(r.output_tokens));
    if (slo.met_by(r)) ++s.good;
  }
  if (s.completed == 0) s.usage_reported = false;
  if (duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / duration_s;
    s.output_throughput = static_cast<double>(s.output_tokens) / duration_s;
    s.total_token_throughput = static_cast<double>(s.input_tokens + s.output_tokens) / duration_s;
    s.goodput = static_cast<double>(s.good) / duration_s;
  }
  s.ttft_ms = compute_stats(std::move(ttft));
  s.tpot_ms = compute_stats(std::move(tpot));
  s.itl_ms = compute_stats(std::move(itl));
  s.e2e_ms = compute_stats(std::move(e2e));
  s.input_len = compute_stats(std::move(in_len));
  s.output_len = compute_stats(std::move(out_len));
  return s;
}

nlohmann::json to_json(const Stats& s) {
  return {{"mean", s.mean}, {"median", s.median}, {"p90", s.p90}, {"p95", s.p95},
          {"p99", s.p99},   {"min", s.min},       {"max", s.max}, {"count", s.count}};
}

nlohmann::json to_json(const LevelSummary& s) {
  return {{"duration_s", s.duration_s},
          {"completed", s.completed},
          {"failed", s.failed},
          {"cancelled", s.cancelled},
          {"failures", s.failures},
          {"request_throughput", s.request_throughput},
          {"output_throughput", s.output_throughput},
          {"total_token_throughput", s.total_token_throughput},
          {"goodput", s.goodput},
          {"good_requests", s.good},
          {"peak_concurrency", s.peak_concurrency},
          {"input_tokens", s.input_tokens},
          {"output_tokens", s.output_tokens},
          {"token_counts_from_usage", s.usage_reported},
          {"ttft_ms", to_json(s.ttft_ms)},
          {"tpot_ms", to_json(s.tpot_ms)},
          {"itl_ms", to_json(s.itl_ms)},
          {"e2e_ms", to_json(s.e2e_ms)},
          {"input_len", to_json(s.input_len)},
          {"output_len", to_json(s.output_len)}};
}

nlohmann::json to_json(const RequestSample& s) {
  nlohmann::json j = {{"ok", s.ok}, {"start_s", s.start_s}, {"e2e_ms", s.e2e_ms}};
  if (!s.ok) j["error"] = s.error;
  if (s.ttft_ms >= 0) j["ttft_ms"] = s.ttft_ms;
  if (s.tpot_ms >= 0) j["tpot_ms"] = s.tpot_ms;
  if (s.ok) {
    j["input_tokens"] = s.input_tokens;
    j["output_tokens"] = s.output_tokens;
    j["usage_reported"] = s.usage_reported;
    j["chunks"] = s.chunks;
    j["itl_ms"] = s.itl_ms;
  }
  return j;
}

}  // namespace mo::bench
