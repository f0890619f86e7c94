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
// Writes diagnose.md, diagnose.json and diagnose.svg into `dir` (created when missing).
ReportPaths write_reports(const std::string& dir, const DiagnoseResult& r);

}  // namespace mo::diagnose
