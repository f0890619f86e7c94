// The results file and what is printed from it: terminal table, Markdown, SVG.
#include <gtest/gtest.h>

#include "mo/bench/report.h"

namespace {

using namespace mo::bench;

RunResult two_levels() {
  RunResult r;
  for (int c : {1, 4}) {
    LevelResult l;
    l.concurrency = c;
    for (int i = 0; i < 4; ++i) {
      RequestSample s;
      s.ok = true;
      s.ttft_ms = 100;
      s.tpot_ms = 20;
      s.e2e_ms = 400 + 10 * i;
      s.itl_ms = {20, 20};
      s.input_tokens = 64;
      s.output_tokens = 16;
      s.usage_reported = true;
      l.samples.push_back(s);
    }
    RequestSample bad;
    bad.error = "HTTP 503: queue full";
    l.samples.push_back(bad);
    l.summary = summarize(l.samples, 1.0, c, {});
    r.levels.push_back(l);
  }
  r.calibration.note = "test";
  return r;
}

TEST(BenchReport, ResultsJsonKeepsSamplesSummaryAndServer) {
  RunContext ctx;
  ctx.base_url = "http://h:1/v1";
  ctx.model = "m";
  const auto j = results_json(two_levels(), ctx);
  EXPECT_EQ(j["server"]["model"], "m");
  ASSERT_EQ(j["levels"].size(), 2u);
  EXPECT_EQ(j["levels"][1]["samples"].size(), 5u);
  EXPECT_EQ(j["levels"][1]["samples"][4]["error"], "HTTP 503: queue full");
  EXPECT_EQ(j["levels"][1]["summary"]["failures"]["HTTP 503: queue full"], 1);
  EXPECT_DOUBLE_EQ(j["levels"][0]["summary"]["output_throughput"].get<double>(), 64.0);
}

TEST(BenchReport, TableMarkdownAndPlotShowTheNumbers) {
  const auto j = results_json(two_levels(), {});
  const std::string table = terminal_table(j);
  EXPECT_NE(table.find("100.0 / 100.0"), std::string::npos) << table;  // TTFT p50 / p99
  EXPECT_NE(table.find("concurrency 4: 1 x HTTP 503: queue full"), std::string::npos) << table;
  const std::string md = markdown_report(j, "x.svg");
  EXPECT_NE(md.find("| 4 | 4 | 1 | 4.00 | 64.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("![latency and throughput](x.svg)"), std::string::npos);
  const std::string svg = svg_plot(j);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find(">E2E latency distribution (CDF)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">Throughput vs concurrency</text>"), std::string::npos);
  EXPECT_NE(svg.find(">latency (ms)</text>"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
