// The report a user reads: the comparison table marks what got worse, the verdict line, the per-layer
// summary from the decision log, and report.json carrying the same numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "mo/core/error.h"
#include "mo/io/json_file.h"
#include "mo/report/eval_report.h"

namespace {

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

mo::eval::ModelEval model(const std::string& name, std::uint64_t bytes, double ppl, double acc, double decode) {
  mo::eval::ModelEval m;
  m.info = {"/models/" + name, name, "safetensors", "f16 x10", bytes};
  mo::eval::PerplexityResult p;
  p.ppl = ppl;
  p.windows = 4;
  p.tokens_scored = 1020;
  m.ppl = p;
  mo::eval::TaskResult t;
  t.name = "arc_easy";
  t.path = "arc_easy.jsonl";
  t.items = t.total_items = 2376;
  t.acc = acc;
  t.acc_stderr = mo::eval::binomial_stderr(acc, 2376);
  t.acc_norm = acc - 0.05;
  t.acc_norm_stderr = mo::eval::binomial_stderr(acc - 0.05, 2376);
  t.chance = 0.25;
  m.tasks.push_back(t);
  mo::eval::LatencyResult l;
  l.prompt_tokens = 128;
  l.output_tokens = 64;
  l.runs = 3;
  l.ttft_ms = 100;
  l.prefill_tokens_per_s = 1280;
  l.decode_tokens_per_s = decode;
  m.latency = l;
  return m;
}

mo::eval::EvalResult pair() {
  mo::eval::EvalResult r;
  r.base = model("base", 300 << 20, 10.0, 0.60, 40);
  r.model = model("quant", 100 << 20, 10.2, 0.55, 96);
  mo::eval::KlResult kl;
  kl.mean = 0.05;
  kl.p99 = 0.6;
  kl.top1_agreement = 0.9;
  kl.tokens = 1020;
  r.model.kl = kl;
  r.text_path = "wiki.txt";
  r.text_tokens = 5000;
  r.threads = 2;
  r.peak_rss_bytes = 1 << 30;
  return r;
}

TEST(EvalReport, VerdictSaysSizePerplexityTasksAndSpeedInPlainWords) {
  mo::report::ReportContext ctx;
  ctx.method = "AWQ INT4 g128";
  EXPECT_EQ(mo::report::verdict(pair(), ctx),
            "AWQ INT4 g128: 3.00x smaller, perplexity +2.00%, top-1 agreement 90.0%, arc_easy -5.00 points; decode 2.40x faster");
}

TEST(EvalReport, TableHasBaseModelDeltaColumnsAndMarksWorseInBold) {
  const std::string md = mo::report::render_markdown(pair(), {});
  EXPECT_TRUE(has(md, "| metric | base | model | delta |")) << md;
  EXPECT_TRUE(has(md, "| perplexity (llama.cpp, ctx 512, 1020 tokens) | 10.0000 | 10.2000 | **+2.00% worse** |")) << md;
  EXPECT_TRUE(has(md, "| arc_easy acc (%, 2376 items) | 60.00 ± 1.01 | 55.00 ± 1.02 | **-5.00 points worse** |")) << md;
  EXPECT_TRUE(has(md, "| decode (tokens/s) | 40.0 | 96.0 | 2.40x faster better |")) << md;
  EXPECT_TRUE(has(md, "| size on disk (MiB) | 300.0 | 100.0 | 3.00x smaller better |")) << md;
  EXPECT_TRUE(has(md, "| KL divergence vs base, mean (nats) | — | 0.05000 |")) << md;
  EXPECT_TRUE(has(md, "chance level 25.0%")) << md;
  EXPECT_TRUE(has(md, "## Environment")) << md;
  EXPECT_TRUE(has(md, "2 threads used")) << md;
}

TEST(EvalReport, SmallTaskDifferencesAreCalledNoise) {
  auto r = pair();
  r.model.tasks[0].acc = 0.595;
  const std::string md = mo::report::render_markdown(r, {});
  EXPECT_TRUE(has(md, "| -0.50 points worse (within noise) |")) << md;
}

TEST(EvalReport, SingleModelReportHasOneValueColumn) {
  auto r = pair();
  r.base.reset();
  r.model.kl.reset();
  const std::string md = mo::report::render_markdown(r, {});
  EXPECT_TRUE(has(md, "# Evaluation of quant")) << md;
  EXPECT_TRUE(has(md, "| metric | value |")) << md;
  EXPECT_FALSE(has(md, "delta")) << md;
  EXPECT_TRUE(has(md, "| peak resident memory (MiB) | 1024.0 |")) << md;
  EXPECT_EQ(mo::report::verdict(r, {}), "quant: perplexity 10.200, arc_easy 55.0%; decode 96.0 tokens/s");
}

TEST(EvalReport, DecisionLogIsSummarisedPerFormatWithFallbacksAndLowestCosine) {
  const auto dir = std::filesystem::temp_directory_path() / ("mo_eval_report_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string log = (dir / "decisions.jsonl").string();
  std::ofstream(log)
      << R"({"module": "model.layers.0.self_attn.q_proj", "requested": "int4 g128", "format": "int4 g128", "bytes": 1000, "cosine": 0.999})"
         "\n"
      << R"({"module": "model.layers.0.mlp.down_proj", "requested": "int4 g128", "format": "int8 per-channel", "bytes": 3000, "cosine": 0.995, "reason": "sensitive: cosine 0.97 < 0.98"})"
         "\n"
      << R"({"module": "lm_head", "requested": "f16", "format": "f16", "bytes": 9000})"
         "\n";
  const auto s = mo::report::summarize_decisions(log);
  EXPECT_EQ(s.modules, 3);
  EXPECT_EQ(s.by_format.at("int4 g128"), 1);
  ASSERT_EQ(s.changed.size(), 1u);
  EXPECT_EQ(s.changed[0].module, "model.layers.0.mlp.down_proj");
  ASSERT_EQ(s.lowest_cosine.size(), 2u);
  EXPECT_EQ(s.lowest_cosine[0].cosine, 0.995);

  mo::report::ReportContext ctx;
  ctx.decisions = s;
  const auto paths = mo::report::write_report(dir.string(), pair(), ctx, false);
  std::ifstream in(paths.markdown);
  const std::string md((std::istreambuf_iterator<char>(in)), {});
  EXPECT_TRUE(has(md, "- `model.layers.0.mlp.down_proj`: int8 per-channel instead of int4 g128 — sensitive: cosine 0.97 < 0.98")) << md;
  const auto j = mo::io::read_json(paths.json);
  EXPECT_EQ(j["metrics"]["ppl"]["model"].get<double>(), 10.2);
  EXPECT_TRUE(j["metrics"]["ppl"]["worse"].get<bool>());
  EXPECT_FALSE(j["metrics"]["decode_tokens_per_s"]["worse"].get<bool>());
  EXPECT_EQ(j["decisions"]["changed"].get<int>(), 1);
  EXPECT_EQ(j["base"]["tasks"]["arc_easy"]["acc"].get<double>(), 0.60);

  std::ofstream(log, std::ios::app) << "[1, 2]\n";
  try {
    mo::report::summarize_decisions(log);
    FAIL() << "expected UsageError";
  } catch (const mo::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), log + ":4: expected a JSON object with a \"module\" string");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
