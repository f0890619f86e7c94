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

TEST(LayerSelector, ASpecThatDoesNotParseIsAnErrorNamingItAndTheForms) {
  for (const std::string bad : {"garbage!!", "[", "a-b", "-3", "3-", "model.layers..mlp", "model.layers.3-.mlp", "1234567890"}) {
    try {
      LayerSelector s({"lm_head", bad});
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const mo::UsageError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("skip_layers: '" + bad + "'", 0), 0u) << msg;
      EXPECT_NE(msg.find("29-31"), std::string::npos) << msg;  // the accepted forms are listed
    }
  }
}

TEST(LayerSelector, ARangePastTheLastLayerNamesTheLayerCount) {
  LayerSelector ok({"29", "0-29", "model.layers.28-29.mlp.down_proj", "*.down_proj", "model.layers.99.*"});
  EXPECT_NO_THROW(ok.check_layer_count(30, "smol"));
  for (const std::string bad : {"1-99", "30", "model.layers.28-31.mlp.down_proj"}) {
    LayerSelector s({bad});
    try {
      s.check_layer_count(30, "smol");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const mo::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("smol has 30 layers (0-29)"), std::string::npos) << e.what();
    }
  }
}

TEST(LayerSelector, AnUnmatchedPatternWarnsWithTheClosestNamesAndLmHeadIsSilent) {
  LayerSelector s({"lm_head", "model.layers.1.mlp.down_prj", "*.gate_prj"});
  for (int layer = 0; layer < 3; ++layer)
    for (const char* n : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})
      EXPECT_FALSE(s.match(hf_linear_module(layer, n), layer));
  const auto w = s.unused_warnings();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].rfind("skip_layers: 'model.layers.1.mlp.down_prj' matched no module; the closest names: model.layers.1.mlp.down_proj", 0),
            0u)
      << w[0];
  // One name per kind of linear: the same name in other layers is not listed again.
  EXPECT_EQ(w[1].rfind("skip_layers: '*.gate_prj' matched no module; the closest names: model.layers.0.mlp.gate_proj, ", 0), 0u) << w[1];
  EXPECT_EQ(w[1].find("model.layers.1.mlp.gate_proj"), std::string::npos) << w[1];
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
