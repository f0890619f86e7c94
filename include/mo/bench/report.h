#pragma once
// The results file is the one representation of a run: the terminal table, bench Markdown, the SVG
// plot and `bench compare` are all produced from it.
#include <string>

#include <nlohmann/json.hpp>

#include "mo/bench/runner.h"

namespace mo::bench {

struct RunContext {
  std::string base_url;
  std::string model;
  nlohmann::json server_models = nlohmann::json::array();  // /v1/models "data" (empty when unavailable)
  std::string server_note;                                 // why server_models is empty
  nlohmann::json workload;                                 // the options as given
  std::string started_at;                                  // ISO 8601 UTC
};

// {"tool", "version", "started_at", "interrupted", "server", "workload", "calibration", "levels": [{concurrency,
// request_rate, interrupted, summary, samples}]}
nlohmann::json results_json(const RunResult& r, const RunContext& ctx);

// One row per level: latency medians/p99s, throughput, goodput, failures; then failure reasons.
std::string terminal_table(const nlohmann::json& results);
std::string markdown_report(const nlohmann::json& results, const std::string& plot_file);
// Two panels: E2E latency CDF per level, output tokens/s against concurrency.
std::string svg_plot(const nlohmann::json& results);

std::string utc_now_iso();

}  // namespace mo::bench
