#pragma once
// The diagnosis for people (terminal table with a bar per layer, diagnose.md, an SVG of cosine by
// layer) and for machines (diagnose.json).
#include <nlohmann/json.hpp>
#include <string>

#include "mo/diagnose/diagnose.h"

namespace mo::diagnose {

std::string render_terminal(const DiagnoseResult& r);
std::string render_markdown(const DiagnoseResult& r);
nlohmann::json to_json(const DiagnoseResult& r);
std::string svg_cosine_plot(const DiagnoseResult& r);

struct ReportPaths {
  std::string markdown, json, svg;
};
// diagnose.md, diagnose.json and diagnose.svg in `dir`.
ReportPaths report_paths(const std::string& dir);
// Writes them into `dir` (created when missing) under io's overwrite policy (io/output_file.h): an existing
// report only with `force`, and only one model-optimizer wrote.
ReportPaths write_reports(const std::string& dir, const DiagnoseResult& r, bool force);

}  // namespace mo::diagnose
