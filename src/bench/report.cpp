#include "mo/bench/report.h"

#include <fmt/format.h>

#include <ctime>

#include "mo/core/build_info.h"

namespace mo::bench {
namespace {

using nlohmann::json;

double num(const json& j, const char* a, const char* b = nullptr) {
  const json* p = &j;
  if (!p->contains(a)) return 0;
  p = &(*p)[a];
  if (b) {
    if (!p->contains(b)) return 0;
    p = &(*p)[b];
  }
  return p->is_number() ? p->get<double>() : 0;
}

std::string level_name(const json& level) {
  const double rate = level.value("request_rate", 0.0);
  return rate > 0 ? fmt::format("{:g}/s cap {}", rate, level.value("concurrency", 0)) : fmt::format("{}", level.value("concurrency", 0));
}

std::string pair_ms(const json& s, const char* metric) {
  if (num(s, metric, "count") == 0) return "-";
  return fmt::format("{:.1f} / {:.1f}", num(s, metric, "median"), num(s, metric, "p99"));
}

}  // namespace

std::string utc_now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json results_json(const RunResult& r, const RunContext& ctx) {
  json levels = json::array();
  for (const auto& l : r.levels) {
    json samples = json::array();
    for (const auto& s : l.samples) samples.push_back(to_json(s));
    levels.push_back({{"concurrency", l.concurrency},
                      {"request_rate", l.request_rate},
                      {"interrupted", l.interrupted},
                      {"summary", to_json(l.summary)},
                      {"samples", std::move(samples)}});
  }
  return {{"tool", "model-optimizer bench"},
          {"version", build_info().version},
          {"started_at", ctx.started_at},
          {"interrupted", r.interrupted},
          {"server", {{"base_url", ctx.base_url}, {"model", ctx.model}, {"models", ctx.server_models}, {"note", ctx.server_note}}},
          {"workload", ctx.workload},
          {"calibration",
           {{"measured", r.calibration.measured},
            {"tokens_per_word", r.calibration.tokens_per_word},
            {"overhead_tokens", r.calibration.overhead_tokens},
            {"note", r.calibration.note}}},
          {"levels", std::move(levels)}};
}

std::string terminal_table(const json& results) {
  std::string out =
      fmt::format("{:>12} {:>6} {:>5} {:>8} {:>11} {:>17} {:>15} {:>15} {:>17} {:>8} {:>5}\n", "concurrency", "ok", "fail", "req/s",
                  "out tok/s", "TTFT ms p50/p99", "TPOT ms p50/p99", "ITL ms p50/p99", "E2E ms p50/p99", "goodput", "peak");
  std::string failures;
  for (const auto& l : results["levels"]) {
    const json& s = l["summary"];
    out += fmt::format("{:>12} {:>6} {:>5} {:>8.2f} {:>11.1f} {:>17} {:>15} {:>15} {:>17} {:>8.2f} {:>5}{}\n", level_name(l),
                       s.value("completed", 0LL), s.value("failed", 0LL), num(s, "request_throughput"), num(s, "output_throughput"),
                       pair_ms(s, "ttft_ms"), pair_ms(s, "tpot_ms"), pair_ms(s, "itl_ms"), pair_ms(s, "e2e_ms"), num(s, "goodput"),
                       s.value("peak_concurrency", 0),
                       l.value("interrupted", false) ? fmt::format("  (interrupted: {} cancelled)", s.value("cancelled", 0LL)) : "");
    for (const auto& [why, n] : s["failures"].items())
      failures += fmt::format("  concurrency {}: {} x {}\n", level_name(l), n.get<long long>(), why);
  }
  if (!failures.empty()) out += "failed requests:\n" + failures;
  return out;
}

std::string markdown_report(const json& results, const std::string& plot_file) {
  const json& srv = results["server"];
  const json& w = results["workload"];
  std::string md = "# bench results\n\n";
  md += fmt::format("- server: `{}`, model `{}`\n", srv.value("base_url", ""), srv.value("model", ""));
  md += fmt::format("- started: {}{}\n", results.value("started_at", ""),
                    results.value("interrupted", false) ? " (interrupted: partial results)" : "");
  md += fmt::format("- workload: `{}`\n", w.dump());
  md += fmt::format("- prompt calibration: {}\n\n", results["calibration"].value("note", ""));
  md +=
      "| concurrency | ok | failed | req/s | output tok/s | total tok/s | goodput req/s | peak in flight | TTFT p50 ms | TPOT p50 ms | ITL "
      "p50 ms | E2E p50 ms |\n";
  md += "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& l : results["levels"]) {
    const json& s = l["summary"];
    md += fmt::format("| {} | {} | {} | {:.2f} | {:.1f} | {:.1f} | {:.2f} | {} | {:.1f} | {:.2f} | {:.2f} | {:.1f} |\n", level_name(l),
                      s.value("completed", 0LL), s.value("failed", 0LL), num(s, "request_throughput"), num(s, "output_throughput"),
                      num(s, "total_token_throughput"), num(s, "goodput"), s.value("peak_concurrency", 0), num(s, "ttft_ms", "median"),
                      num(s, "tpot_ms", "median"), num(s, "itl_ms", "median"), num(s, "e2e_ms", "median"));
  }
  for (const auto& l : results["levels"]) {
    const json& s = l["summary"];
    md +=
        fmt::format("\n## concurrency {}\n\n| metric (ms) | mean | median | p90 | p95 | p99 |\n|---|---|---|---|---|---|\n", level_name(l));
    for (const char* m : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
      if (num(s, m, "count") == 0) continue;
      md += fmt::format("| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n", std::string(m).substr(0, std::string(m).size() - 3),
                        num(s, m, "mean"), num(s, m, "median"), num(s, m, "p90"), num(s, m, "p95"), num(s, m, "p99"));
    }
    md += fmt::format("\ninput tokens per request: mean {:.1f}; output tokens per request: mean {:.1f}{}\n", num(s, "input_len", "mean"),
                      num(s, "output_len", "mean"),
                      s.value("token_counts_from_usage", false) ? " (from usage)" : " (usage missing: estimated)");
    for (const auto& [why, n] : s["failures"].items()) md += fmt::format("- failed {} x: {}\n", n.get<long long>(), why);
  }
  if (!plot_file.empty()) md += fmt::format("\n![latency and throughput]({})\n", plot_file);
  return md;
}

}  // namespace mo::bench
