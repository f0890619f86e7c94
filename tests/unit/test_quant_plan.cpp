#include <gtest/gtest.h>

#include "mo/core/error.h"
#include "mo/quant/layer_plan.h"
#include "mo/quant/layer_select.h"

using namespace mo::quant;

TEST(LayerSelector, NamesGlobsAndRanges) {
  LayerSelector s({"lm_head", "model.layers.31.*", "29-30", "*.mlp.down_proj", "model.layers.3-4.self_attn.v_proj"});
  EXPECT_EQ(s.match("lm_head", -1).value(), "lm_head");
  EXPECT_EQ(s.match("model.layers.31.self_attn.q_proj", 31).value(), "model.layers.31.*");
  EXPECT_EQ(s.match("model.layers.29.self_attn.k_proj", 29).value(), "29-30");
  EXPECT_EQ(s.match("model.layers.2.mlp.down_proj", 2).value(), "*.mlp.down_proj");
  EXPECT_EQ(s.match("model.layers.4.self_attn.v_proj", 4).value(), "model.layers.3-4.self_attn.v_proj");
  EXPECT_FALSE(s.match("model.layers.5.self_attn.v_proj", 5));
  EXPECT_FALSE(s.match("model.layers.3.self_attn.q_proj", 3));
  EXPECT_FALSE(s.match("model.layers.28.mlp.up_proj", 28));
  EXPECT_TRUE(s.unused().empty());
}

TEST(LayerSelector, ReportsUnusedPatternsAndBadRanges) {
  LayerSelector s({"model.layers.99.*", "7"});
  EXPECT_TRUE(s.match("model.layers.7.mlp.up_proj", 7));
  ASSERT_EQ(s.unused().size(), 1u);
  EXPECT_EQ(s.unused()[0], "model.layers.99.*");
  try {
    LayerSelector bad({"31-29"});
    FAIL() << "expected a usage error";
  } catch (const mo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("skip_layers: '31-29'"), std::string::npos) << e.what();
  }
}

TEST(LinearPlan, RequestedSchemeWhenTheShapeFits) {
  LinearPlan p = plan_linear(OutputLayout::gptq, 576, 1536, 4, 128, true, true);
  EXPECT_EQ(p.kind, LinearPlan::integer);
  EXPECT_EQ(p.label(), "int4 g128");
  EXPECT_TRUE(p.reason.empty());
}

TEST(LinearPlan, Stories260kFfnWidthFallsBackAndSaysWhy) {
  // down_proj of stories260K: in_features 172 cannot be packed 8 per int32 at 4 bits, but 4 per int32 at 8 bits.
  LinearPlan down = plan_linear(OutputLayout::gptq, 64, 172, 4, 32, true, true);
  EXPECT_EQ(down.label(), "int8 per-channel");
  EXPECT_NE(down.reason.find("in_features 172"), std::string::npos) << down.reason;
  // A smaller group when the requested one does not divide the width.
  LinearPlan q = plan_linear(OutputLayout::gptq, 64, 64, 4, 128, true, true);
  EXPECT_EQ(q.label(), "int4 g64");
  EXPECT_NE(q.reason.find("not divisible by group 128"), std::string::npos) << q.reason;
  // AWQ keeps one group size for the model and has no INT8: 16-bit.
  LinearPlan awq = plan_linear(OutputLayout::awq_gemm, 172, 64, 4, 32, false, true);
  EXPECT_EQ(awq.label(), "f16");
  EXPECT_NE(awq.reason.find("out_features 172 is not a multiple of 8"), std::string::npos) << awq.reason;
  LinearPlan awq_group = plan_linear(OutputLayout::awq_gemm, 64, 64, 4, 128, false, true);
  EXPECT_EQ(awq_group.label(), "f16");
}

TEST(LinearPlan, Fp8AndSixteenBit) {
  EXPECT_EQ(plan_linear(OutputLayout::fp8, 172, 64, 8, 128, true, true).label(), "fp8 per-channel");
  EXPECT_EQ(plan_linear(OutputLayout::fp8, 172, 64, 8, 128, true, false).label(), "fp8 per-tensor");
  EXPECT_EQ(plan_linear(OutputLayout::gptq, 64, 64, 16, 128, true, true).label(), "f16");
}
