// diagnose.json, the SVG plot of cosine by layer, and writing the three report files.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "mo/core/error.h"
#include "mo/diagnose/report.h"
#include "mo/io/output_file.h"

namespace mo::diagnose {
namespace {

nlohmann::json metrics_json(const Metrics& m) { return {{"cosine", m.cosine}, {"rel_l2", m.rel_l2}, {"max_abs", m.max_abs}}; }

}  // namespace

nlohmann::json to_json(const DiagnoseResult& r) {
  nlohmann::json j;
  j["original"] = {{"path", r.original}, {"format", r.original_format}};
  j["quantized"] = {{"path", r.quantized}, {"format", r.quantized_format}};
  j["data"] = {{"description", r.data}, {"samples", r.samples}, {"tokens", r.tokens}};
  j["threshold"] = r.threshold;
  j["output"] = {{"kl_mean", r.output.kl_mean},
                 {"kl_p99", r.output.kl_p99},
                 {"kl_max", r.output.kl_max},
                 {"top1_agreement", r.output.top1_agreement},
                 {"tokens", r.output.tokens}};
  j["layers"] = nlohmann::json::array();
  for (const auto& l : r.layers) {
    nlohmann::json lj = {{"layer", l.layer},
                         {"local", metrics_json(l.local)},
                         {"cumulative", metrics_json(l.cumulative)},
                         {"flagged", l.flagged},
                         {"block_below_threshold", l.block_below}};
    lj["linears"] = nlohmann::json::array();
    for (const auto& x : l.linears)
      lj["linears"].push_back({{"name", x.name},
                               {"module", x.module},
                               {"params", x.params},
                               {"original_type", x.original_type},
                               {"quantized_type", x.quantized_type},
                               {"original_bytes", x.original_bytes},
                               {"quantized_bytes", x.quantized_bytes},
                               {"local", metrics_json(x.local)},
                               {"cumulative", metrics_json(x.cumulative)},
                               {"weights",
                                {{"variance", x.weights.variance},
                                 {"kurtosis", x.weights.kurtosis},
                                 {"max_mean_ratio", x.weights.max_mean_ratio},
                                 {"outlier_fraction", x.weights.outlier_fraction}}},
                               {"flagged", x.flagged}});
    j["layers"].push_back(std::move(lj));
  }
  nlohmann::json items = nlohmann::json::array();
  for (const auto& it : r.advice.items)
    items.push_back({{"linear", it.linear},
                     {"layers", it.layers},
                     {"patterns", it.patterns},
                     {"min_cosine", it.min_cosine},
                     {"max_cosine", it.max_cosine},
                     {"skip_cost_mb", it.skip_cost_mb},
                     {"int8_cost_mb", it.int8_cost_mb},
                     {"fused", it.fused}});
  j["advice"] = {{"items", items},
                 {"skip_layers", r.advice.skip_layers},
                 {"skip_cost_mb", r.advice.skip_cost_mb},
                 {"int8_cost_mb", r.advice.int8_cost_mb},
                 {"pattern", r.advice.pattern_summary},
                 {"lines", r.advice.lines}};
  j["notes"] = r.notes;
  j["seconds"] = r.seconds;
  return j;
}

std::string svg_cosine_plot(const DiagnoseResult& r) {
  constexpr double W = 640, H = 340, left = 64, right = 150, top = 36, bottom = 44;
  const double pw = W - left - right, ph = H - top - bottom;
  double lo = r.threshold;
  for (const auto& l : r.layers) {
    lo = std::min({lo, l.local.cosine, l.cumulative.cosine});
    for (const auto& x : l.linears) lo = std::min(lo, x.local.cosine);
  }
  lo = std::max(-1.0, std::floor((lo - (1 - lo) * 0.1) * 1000) / 1000);
  if (lo >= 1) lo = 0.999;
  const int n = static_cast<int>(r.layers.size());
  const auto X = [&](double i) { return left + (n > 1 ? pw * i / (n - 1) : pw / 2); };
  const auto Y = [&](double c) { return top + ph * (1 - (c - lo) / (1 - lo)); };
  std::string s = fmt::format(R"svg(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif">)svg", W, H);
  s += fmt::format(
      R"svg(<rect width="{}" height="{}" fill="white"/><text x="{}" y="20" font-size="14" text-anchor="middle">cosine similarity by layer (quantized vs original)</text>)svg",
      W, H, left + pw / 2);
  s += fmt::format(R"svg(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#444"/>)svg", left, top, pw, ph);
  for (int i = 0; i <= 4; ++i) {
    const double c = lo + (1 - lo) * i / 4;
    s += fmt::format(
        R"svg(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="#ddd"/><text x="{}" y="{:.1f}" font-size="10" text-anchor="end">{:.4f}</text>)svg",
        left, left + pw, Y(c), Y(c), left - 4, Y(c) + 3, c);
  }
  const int step = std::max(1, n / 10);
  for (int i = 0; i < n; i += step)
    s += fmt::format(R"svg(<text x="{:.1f}" y="{}" font-size="10" text-anchor="middle">{}</text>)svg", X(i), top + ph + 14, i);
  s += fmt::format(R"svg(<text x="{}" y="{}" font-size="11" text-anchor="middle">decoder layer</text>)svg", left + pw / 2, H - 8);
  s += fmt::format(R"svg(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="#d62728" stroke-dasharray="5,4"/>)svg", left, left + pw,
                   Y(r.threshold), Y(r.threshold));
  struct Series {
    const char* label;
    const char* color;
    double (*value)(const LayerDiag&);
  };
  const Series series[] = {
      {"layer, local", "#1f77b4", [](const LayerDiag& l) { return l.local.cosine; }},
      {"layer, cumulative", "#ff7f0e", [](const LayerDiag& l) { return l.cumulative.cosine; }},
      {"worst linear, local", "#2ca02c",
       [](const LayerDiag& l) {
         double m = 1;
         for (const auto& x : l.linears) m = std::min(m, x.local.cosine);
         return m;
       }},
  };
  int k = 0;
  for (const auto& se : series) {
    std::string pts;
    for (int i = 0; i < n; ++i) pts += fmt::format("{:.1f},{:.1f} ", X(i), Y(se.value(r.layers[i])));
    s += fmt::format(R"svg(<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>)svg", se.color, pts);
    for (int i = 0; i < n; ++i)
      if (se.value(r.layers[i]) < r.threshold)
        s += fmt::format(R"svg(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"/>)svg", X(i), Y(se.value(r.layers[i])), se.color);
    const double ly = top + 10 + 18 * k++;
    s += fmt::format(
        R"svg(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2"/><text x="{}" y="{}" font-size="11">{}</text>)svg",
        left + pw + 10, left + pw + 28, ly, ly, se.color, left + pw + 32, ly + 4, se.label);
  }
  const double ly = top + 10 + 18 * k;
  s += fmt::format(
      R"svg(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#d62728" stroke-dasharray="5,4"/><text x="{}" y="{}" font-size="11">threshold {:.2f}</text>)svg",
      left + pw + 10, left + pw + 28, ly, ly, left + pw + 32, ly + 4, r.threshold);
  return s + "</svg>\n";
}

ReportPaths report_paths(const std::string& dir) {
  namespace fs = std::filesystem;
  return {(fs::path(dir) / "diagnose.md").string(), (fs::path(dir) / "diagnose.json").string(), (fs::path(dir) / "diagnose.svg").string()};
}

ReportPaths write_reports(const std::string& dir, const DiagnoseResult& r, bool force) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UsageError(fmt::format("output_path: cannot create {}: {}", dir, ec.message()));
  const ReportPaths p = report_paths(dir);
  nlohmann::json j = to_json(r);
  j[io::kWrittenByKey] = io::written_by_value();
  io::write_output_file(p.markdown, io::with_file_marker(render_markdown(r)), force, "output_path");
  io::write_output_file(p.json, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", force, "output_path");
  io::write_output_file(p.svg, io::with_file_marker(svg_cosine_plot(r)), force, "output_path");
  return p;
}

}  // namespace mo::diagnose
