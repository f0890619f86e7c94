// The numbers `diagnose` reports for one pair of output streams, and the advice it derives.
#include <gtest/gtest.h>

#include <cmath>

#include "mo/diagnose/diagnose.h"
#include "mo/diagnose/metrics.h"
#include "mo/quant/layer_select.h"

namespace {

using mo::diagnose::LayerDiag;
using mo::diagnose::LinearDiag;
using mo::diagnose::MetricAccumulator;

TEST(DiagnoseMetrics, IdenticalOutputsGiveCosineOneAndNoError) {
  const float a[] = {1, -2, 3, 0.5f};
  MetricAccumulator acc;
  acc.add(a, a, 4);
  const auto m = acc.result();
  EXPECT_DOUBLE_EQ(m.cosine, 1.0);
  EXPECT_DOUBLE_EQ(m.rel_l2, 0.0);
  EXPECT_DOUBLE_EQ(m.max_abs, 0.0);
}

TEST(DiagnoseMetrics, AccumulatesOverCallsAsOneFlattenedVector) {
  const float o1[] = {1, 0}, q1[] = {1, 1};  // second call: orthogonal part
  const float o2[] = {0, 2}, q2[] = {0, 2};
  MetricAccumulator acc;
  acc.add(o1, q1, 2);
  acc.add(o2, q2, 2);
  const auto m = acc.result();
  // o = (1,0,0,2), q = (1,1,0,2): cos = 5 / (sqrt(5) sqrt(6)), ||q-o|| / ||o|| = 1 / sqrt(5).
  EXPECT_NEAR(m.cosine, 5 / std::sqrt(30.0), 1e-12);
  EXPECT_NEAR(m.rel_l2, 1 / std::sqrt(5.0), 1e-12);
  EXPECT_DOUBLE_EQ(m.max_abs, 1.0);
}

TEST(DiagnoseMetrics, AllZeroQuantizedOutputIsCosineZero) {
  const float o[] = {1, 2}, q[] = {0, 0};
  MetricAccumulator acc;
  acc.add(o, q, 2);
  EXPECT_DOUBLE_EQ(acc.result().cosine, 0.0);
  EXPECT_DOUBLE_EQ(acc.result().rel_l2, 1.0);
}

TEST(DiagnoseAdvice, LayerPatternsUseRangesSkipLayersAccepts) {
  const auto p = mo::diagnose::layer_patterns("down_proj", {3, 28, 29, 30, 31});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0], "model.layers.3.mlp.down_proj");
  EXPECT_EQ(p[1], "model.layers.28-31.mlp.down_proj");
  const mo::quant::LayerSelector sel(p);
  EXPECT_TRUE(sel.match("model.layers.30.mlp.down_proj", 30));
  EXPECT_TRUE(sel.match("model.layers.3.mlp.down_proj", 3));
  EXPECT_FALSE(sel.match("model.layers.27.mlp.down_proj", 27));
  EXPECT_FALSE(sel.match("model.layers.30.mlp.up_proj", 30));
  EXPECT_EQ(mo::diagnose::layer_patterns("q_proj", {7})[0], "model.layers.7.self_attn.q_proj");
}

// 8 layers, each with a down_proj of 1M weights stored in 0.6 MB; `bad` layers at cosine 0.95.
std::vector<LayerDiag> layers_with_bad(const std::vector<int>& bad) {
  std::vector<LayerDiag> out;
  for (int i = 0; i < 8; ++i) {
    LayerDiag l;
    l.layer = i;
    LinearDiag x;
    x.layer = i;
    x.name = "down_proj";
    x.module = mo::quant::hf_linear_module(i, "down_proj");
    x.params = 1'000'000;
    x.quantized_bytes = 600'000;
    const bool is_bad = std::find(bad.begin(), bad.end(), i) != bad.end();
    x.local.cosine = is_bad ? 0.95 + 0.01 * (i - bad.front()) : 0.999;
    x.flagged = x.local.cosine < 0.98;
    l.flagged = x.flagged;
    l.linears.push_back(x);
    out.push_back(l);
  }
  return out;
}

TEST(DiagnoseAdvice, LastLayersGetOneRangePatternTheirCostAndTheSummarySaysWhere) {
  const auto a = mo::diagnose::make_advice(layers_with_bad({6, 7}), 0.98, false);
  ASSERT_EQ(a.items.size(), 1u);
  EXPECT_EQ(a.skip_layers, std::vector<std::string>{"model.layers.6-7.mlp.down_proj"});
  // 16 bits: 2 MB per linear over 0.6 MB stored, two linears.
  EXPECT_NEAR(a.skip_cost_mb, 2 * (2.0 - 0.6), 1e-9);
  EXPECT_NEAR(a.int8_cost_mb, 2 * ((1.0 + 3.0 / 128) - 0.6), 1e-9);
  ASSERT_FALSE(a.lines.empty());
  EXPECT_NE(a.lines[0].find("layers 6–7 down_proj below 0.98 (local cosine 0.9500–0.9600)"), std::string::npos) << a.lines[0];
  EXPECT_NE(a.lines[0].find("`skip_layers: [model.layers.6-7.mlp.down_proj]` (+2.80 MB)"), std::string::npos) << a.lines[0];
  EXPECT_NE(a.pattern_summary.find("errors concentrated in the last layers (6–7)"), std::string::npos) << a.pattern_summary;
}

// One layer whose v_proj (1M weights, 0.5 MB stored) is flagged, with q/k/o beside it.
std::vector<LayerDiag> layer_with_bad_v_proj() {
  LayerDiag l;
  for (const char* name : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
    LinearDiag x;
    x.name = name;
    x.module = mo::quant::hf_linear_module(0, name);
    x.params = 1'000'000;
    x.quantized_bytes = 500'000;
    x.local.cosine = x.name == "v_proj" ? 0.97 : 0.99;
    x.flagged = x.local.cosine < 0.98;
    l.flagged = l.flagged || x.flagged;
    l.linears.push_back(x);
  }
  return {l};
}

TEST(DiagnoseAdvice, HfCostIncludesTheQkvPartnersVllmFusesGgufDoesNot) {
  const auto hf = mo::diagnose::make_advice(layer_with_bad_v_proj(), 0.98, false);
  ASSERT_EQ(hf.items.size(), 1u);
  EXPECT_EQ(hf.skip_layers, std::vector<std::string>{"model.layers.0.self_attn.v_proj"});
  EXPECT_NEAR(hf.skip_cost_mb, 3 * 1.5, 1e-9);  // q, k and v: 2 MB each in f16 over 0.5 MB stored
  EXPECT_EQ(hf.items[0].fused, (std::vector<std::string>{"q_proj", "k_proj"}));
  EXPECT_NE(hf.lines[0].find("(+4.50 MB, q_proj and k_proj included: vLLM fuses them with it)"), std::string::npos) << hf.lines[0];
  const auto gguf = mo::diagnose::make_advice(layer_with_bad_v_proj(), 0.98, true);
  EXPECT_NEAR(gguf.skip_cost_mb, 1.5, 1e-9);
  EXPECT_TRUE(gguf.items[0].fused.empty());
}

TEST(DiagnoseAdvice, NothingFlaggedGivesNoAdviceAndNamesTheWeakestLayer) {
  const auto a = mo::diagnose::make_advice(layers_with_bad({}), 0.98, true);
  EXPECT_TRUE(a.items.empty());
  EXPECT_TRUE(a.skip_layers.empty());
  EXPECT_TRUE(a.lines.empty());
  EXPECT_NE(a.pattern_summary.find("no linear under 0.98"), std::string::npos) << a.pattern_summary;
}

}  // namespace
