#pragma once
// The evaluation report: report.md for people (GitHub-readable tables: base / model / delta with the
// direction that is worse marked, per-layer summary, environment, a one-line verdict) and report.json
// with the same numbers for machines.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mo/eval/evaluate.h"
#include "mo/report/decision_summary.h"

namespace mo::report {

struct ReportContext {
  std::string title;                         // heading; empty = "Evaluation of <model>"
  std::string method;                        // what was done to the model, e.g. "AWQ INT4 g128"; starts the verdict
  std::string command;                       // the command line that produced the report
  std::optional<DecisionSummary> decisions;  // per-layer summary, when the model came from `quantize`
  std::vector<std::string> notes;            // shown under the verdict (e.g. "tasks limited to 200 items")
};

// "AWQ INT4 g128: 3.6x smaller, perplexity +2.1%, arc_easy -0.8 points; decode 2.4x faster"
std::string verdict(const eval::EvalResult& r, const ReportContext& ctx);
// The Results table alone (what the terminal shows).
std::string render_results(const eval::EvalResult& r);
std::string render_markdown(const eval::EvalResult& r, const ReportContext& ctx);
nlohmann::json report_json(const eval::EvalResult& r, const ReportContext& ctx);

// This process's command line (/proc/self/cmdline), arguments with spaces quoted, for "Produced by".
std::string invoking_command_line();

struct ReportPaths {
  std::string markdown, json;
};
// <dir>/report.md and <dir>/report.json, or <file>.report.md/.json beside a file model (an existing file, or
// a path ending in .gguf).
ReportPaths report_paths(const std::string& dir);
// Writes them (creating the directory) under io's overwrite policy (io/output_file.h): an existing report
// only with `force`, and only one model-optimizer wrote.
ReportPaths write_report(const std::string& dir, const eval::EvalResult& r, const ReportContext& ctx, bool force);

}  // namespace mo::report
