#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mo/bench/report.h"

namespace mo::bench {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
constexpr double kW = 440, kH = 300, kLeft = 60, kRight = 15, kTop = 35, kBottom = 45;

// A "nice" upper bound for an axis: 1, 2 or 5 times a power of ten, at or above x.
double nice_ceil(double x) {
  if (x <= 0) return 1;
  const double p = std::pow(10, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= x) return m * p;
  return 10 * p;
}

std::string axes(double x0, const std::string& title, const std::string& xlabel, const std::string& ylabel, double xmax, double ymax,
                 bool x_ticks) {
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  std::string s = fmt::format(R"svg(<text x="{}" y="20" font-size="14" text-anchor="middle">{}</text>)svg", x0 + kW / 2, title);
  s += fmt::format(R"svg(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#444"/>)svg", x0 + kLeft, kTop, pw, ph);
  for (int i = 0; i <= 4; ++i) {
    const double y = kTop + ph - ph * i / 4;
    s += fmt::format(
        R"svg(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#ddd"/><text x="{}" y="{}" font-size="10" text-anchor="end">{:g}</text>)svg",
        x0 + kLeft, x0 + kLeft + pw, y, y, x0 + kLeft - 4, y + 3, ymax * i / 4);
    if (x_ticks) {
      const double x = x0 + kLeft + pw * i / 4;
      s += fmt::format(R"svg(<text x="{}" y="{}" font-size="10" text-anchor="middle">{:g}</text>)svg", x, kTop + ph + 14, xmax * i / 4);
    }
  }
  s += fmt::format(R"svg(<text x="{}" y="{}" font-size="11" text-anchor="middle">{}</text>)svg", x0 + kLeft + pw / 2, kH - 8, xlabel);
  s += fmt::format(R"svg(<text x="{}" y="{}" font-size="11" text-anchor="middle" transform="rotate(-90 {} {})">{}</text>)svg", x0 + 14,
                   kTop + ph / 2, x0 + 14, kTop + ph / 2, ylabel);
  return s;
}

}  // namespace

std::string svg_plot(const nlohmann::json& results) {
  const auto& levels = results["levels"];
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  std::string body;

  // Left: CDF of end-to-end latency of the successful requests, one line per level.
  double xmax = 0;
  std::vector<std::vector<double>> lat;
  for (const auto& l : levels) {
    std::vector<double> v;
    for (const auto& s : l["samples"])
      if (s.value("ok", false)) v.push_back(s.value("e2e_ms", 0.0));
    std::sort(v.begin(), v.end());
    if (!v.empty()) xmax = std::max(xmax, v.back());
    lat.push_back(std::move(v));
  }
  xmax = nice_ceil(xmax);
  body += axes(0, "E2E latency distribution (CDF)", "latency (ms)", "fraction of requests", xmax, 1.0, true);
  for (std::size_t i = 0; i < lat.size(); ++i) {
    if (lat[i].empty()) continue;
    std::string pts;
    const double n = static_cast<double>(lat[i].size());
    for (std::size_t k = 0; k < lat[i].size(); ++k) {
      const double x = kLeft + pw * lat[i][k] / xmax;
      pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x, kTop + ph - ph * k / n, x, kTop + ph - ph * (k + 1) / n);
    }
    const char* color = kColors[i % 8];
    body += fmt::format(R"svg(<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>)svg", color, pts);
    body += fmt::format(R"svg(<text x="{}" y="{}" font-size="10" fill="{}">c={}</text>)svg", kLeft + 6, kTop + 12 + 12 * i, color,
                        levels[i].value("concurrency", 0));
  }

  // Right: output tokens/s per level, levels evenly spaced and labelled with their concurrency.
  double ymax = 0;
  for (const auto& l : levels) ymax = std::max(ymax, l["summary"].value("output_throughput", 0.0));
  ymax = nice_ceil(ymax);
  body += axes(kW, "Throughput vs concurrency", "concurrency", "output tokens/s", 0, ymax, false);
  std::string pts;
  const std::size_t n = levels.size();
  for (std::size_t i = 0; i < n; ++i) {
    const double x = kW + kLeft + pw * (static_cast<double>(i) + 0.5) / static_cast<double>(n);
    const double y = kTop + ph - ph * levels[i]["summary"].value("output_throughput", 0.0) / ymax;
    pts += fmt::format("{:.1f},{:.1f} ", x, y);
    body += fmt::format(R"svg(<circle cx="{:.1f}" cy="{:.1f}" r="3.5" fill="#1f77b4"/>)svg", x, y);
    body += fmt::format(R"svg(<text x="{:.1f}" y="{}" font-size="10" text-anchor="middle">{}</text>)svg", x, kTop + ph + 14,
                        levels[i].value("concurrency", 0));
  }
  body += fmt::format(R"svg(<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{}"/>)svg", pts);
  return fmt::format(R"svg(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif">)svg"
                     R"svg(<rect width="100%" height="100%" fill="white"/>{}</svg>)svg"
                     "\n",
                     2 * kW, kH, body);
}

}  // namespace mo::bench
