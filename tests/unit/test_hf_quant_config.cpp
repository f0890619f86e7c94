// The quantization_config we write (keys vLLM / Transformers / compressed-tensors read) and the parser
// the engine loads checkpoints with.
#include <gtest/gtest.h>

#include <string>

#include "mo/core/error.h"
#include "mo/formats/hf_quant_config.h"

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using namespace mo::quant;

std::string error_of(const json& q) {
  try {
    formats::parse_quantization_config(q);
  } catch (const mo::UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(formats::HfQuantConfig, WritesAwqGemm) {
  formats::AwqConfigOptions o;
  o.group_size = 64;
  EXPECT_EQ(formats::awq_quantization_config(o), json::parse(R"({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true,
      "version": "gemm", "modules_to_not_convert": null})"));
  o.modules_to_not_convert = {"mlp"};
  EXPECT_EQ(formats::awq_quantization_config(o)["modules_to_not_convert"], json::parse(R"(["mlp"])"));
}

TEST(formats::HfQuantConfig, WritesGptqWithDynamicRules) {
  formats::GptqConfigOptions o;
  o.bits = 4;
  o.group_size = 128;
  o.desc_act = true;
  o.sym = false;
  o.dynamic = {{R"(model\.layers\.1\..*)", false, {{"bits", 8}}}, {R"(.*\.mlp\..*)", true, json::object()}};
  EXPECT_EQ(formats::gptq_quantization_config(o), json::parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "damp_percent": 0.01,
      "desc_act": true, "static_groups": false, "sym": false, "true_sequential": true, "lm_head": false,
      "checkpoint_format": "gptq", "dynamic": {"+:model\\.layers\\.1\\..*": {"bits": 8}, "-:.*\\.mlp\\..*": {}}})"));
  o.v2 = true;
  const json file = formats::gptq_quantize_config_file(o);
  EXPECT_EQ(file["checkpoint_format"], "gptq_v2");
  EXPECT_TRUE(file["meta"]["quantizer"][0].get<std::string>().starts_with("model-optimizer:"));
}

TEST(formats::HfQuantConfig, WritesCompressedTensorsFp8) {
  const json args = json::parse(R"({"num_bits": 8, "type": "float", "symmetric": true, "group_size": null, "strategy": "channel",
      "block_structure": null, "dynamic": false, "actorder": null, "observer": "minmax", "observer_kwargs": {}})");
  json act = args;
  act["strategy"] = "token", act["dynamic"] = true, act["observer"] = nullptr;
  const json expected = {{"quant_method", "compressed-tensors"}, {"format", "float-quantized"}, {"quantization_status", "compressed"},
                         {"global_compression_ratio", nullptr}, {"kv_cache_scheme", nullptr}, {"ignore", {"lm_head"}},
                         {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", args}, {"input_activations", act},
                                                         {"output_activations", nullptr}}}}}};
  EXPECT_EQ(formats::fp8_quantization_config({}), expected);
  formats::Fp8ConfigOptions o;
  o.per_channel = false;
  o.activations = formats::Fp8Activations::none;
  const json t = formats::fp8_quantization_config(o);
  EXPECT_EQ(t["config_groups"]["group_0"]["weights"]["strategy"], "tensor");
  EXPECT_TRUE(t["config_groups"]["group_0"]["input_activations"].is_null());
}

TEST(formats::HfQuantConfig, ParsesWhatItWrites) {
  const auto awq = formats::parse_quantization_config(formats::awq_quantization_config({64, {"mlp"}}));
  EXPECT_EQ(awq.describe(), "awq 4-bit g64 gemm");
  EXPECT_FALSE(awq.module("model.layers.0.mlp.up_proj").quantized);
  EXPECT_FALSE(awq.module("lm_head").quantized);
  EXPECT_EQ(awq.module("model.layers.0.self_attn.q_proj").group_size, 64);

  const auto fp8 = formats::parse_quantization_config(formats::fp8_quantization_config({}));
  EXPECT_EQ(fp8.describe(), "fp8 e4m3 per-channel (dynamic per-token activations)");
  EXPECT_TRUE(fp8.module("model.layers.3.mlp.down_proj").quantized);
  EXPECT_FALSE(fp8.module("lm_head").quantized);
}

TEST(formats::HfQuantConfig, GptqDynamicRulesApplyFirstMatchInFileOrder) {
  // GPTQModel's example: skip layers 2+, 8-bit g32 for layer 1 (re.match: anchored at the start only).
  const auto q = ordered_json::parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true, "sym": true,
      "checkpoint_format": "gptq_v2", "dynamic": {"-:model\\.layers\\.([2-9]\\d*|[1-9]\\d+)\\..*": {},
      ".*\\.1\\..*": {"bits": 8, "group_size": 32, "desc_act": false}}})");
  const auto c = formats::parse_quantization_config(q);
  EXPECT_TRUE(c.gptq_v2);
  EXPECT_EQ(c.dynamic[0].pattern, R"(model\.layers\.([2-9]\d*|[1-9]\d+)\..*)");
  EXPECT_TRUE(c.dynamic[0].skip);
  const auto l0 = c.module("model.layers.0.self_attn.q_proj");
  EXPECT_TRUE(l0.quantized);
  EXPECT_EQ(l0.bits, 4);
  const auto l1 = c.module("model.layers.1.mlp.down_proj");
  EXPECT_EQ(l1.bits, 8);
  EXPECT_EQ(l1.group_size, 32);
  EXPECT_FALSE(l1.desc_act);
  EXPECT_FALSE(c.module("model.layers.12.mlp.down_proj").quantized);
  EXPECT_FALSE(c.module("lm_head").quantized);

  // Overlapping rules: the earlier one wins, so file order matters.
  const auto skip_first = formats::parse_quantization_config(ordered_json::parse(
      R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "dynamic": {"-:.*mlp.*": {}, "+:.*": {"bits": 8}}})"));
  EXPECT_FALSE(skip_first.module("model.layers.0.mlp.up_proj").quantized);
  EXPECT_EQ(skip_first.module("model.layers.0.self_attn.o_proj").bits, 8);
}

TEST(formats::HfQuantConfig, DynamicPatternCoversVllmFusedLayers) {
  const std::string q = formats::gptq_dynamic_pattern("model.layers.3.self_attn.q_proj");
  EXPECT_EQ(q, R"(model\.layers\.3\.self_attn\.(?:q_proj|qkv_proj)$)");
  EXPECT_TRUE(formats::regex_match_prefix(q, "model.layers.3.self_attn.qkv_proj"));  // vLLM's name
  EXPECT_TRUE(formats::regex_match_prefix(q, "model.layers.3.self_attn.q_proj"));    // ours
  EXPECT_FALSE(formats::regex_match_prefix(q, "model.layers.33.self_attn.q_proj"));
  const std::string down = formats::gptq_dynamic_pattern("model.layers.3.mlp.down_proj");
  EXPECT_EQ(down, R"(model\.layers\.3\.mlp\.down_proj$)");
  EXPECT_TRUE(formats::regex_match_prefix(formats::gptq_dynamic_pattern("model.layers.0.mlp.up_proj"), "model.layers.0.mlp.gate_up_proj"));
}

TEST(formats::HfQuantConfig, Fp8IgnoreTakesNamesAndRegexes) {
  json q = formats::fp8_quantization_config({});
  q["ignore"] = {"lm_head", "re:.*layers\\.0\\..*"};
  const auto c = formats::parse_quantization_config(q);
  EXPECT_FALSE(c.module("model.layers.0.mlp.up_proj").quantized);
  EXPECT_TRUE(c.module("model.layers.10.mlp.up_proj").quantized);
}

TEST(formats::HfQuantConfig, RejectsWhatItCannotLoadWithTheKey) {
  EXPECT_NE(error_of({{"quant_method", "bitsandbytes"}}).find("quant_method: 'bitsandbytes'"), std::string::npos);
  EXPECT_NE(error_of({{"quant_method", "awq"}, {"bits", 4}, {"version", "gemv"}}).find("'gemv' is not supported"), std::string::npos);
  EXPECT_NE(error_of({{"quant_method", "gptq"}, {"bits", 3}}).find("3-bit GPTQ"), std::string::npos);
  EXPECT_NE(error_of({{"quant_method", "gptq"}, {"bits", 4}, {"checkpoint_format", "marlin"}}).find("checkpoint_format: 'marlin'"),
            std::string::npos);
  EXPECT_NE(error_of({{"quant_method", "gptq"}, {"bits", "4"}}).find("quantization_config.bits: expected an integer"), std::string::npos);
  EXPECT_NE(error_of({{"quant_method", "gptq"}, {"bits", 4}, {"dynamic", {{"+:(", {{"bits", 8}}}}}}).find("quantization regex '('"),
            std::string::npos);
  json w4 = formats::fp8_quantization_config({});
  w4["format"] = "pack-quantized";
  EXPECT_NE(error_of(w4).find("'pack-quantized' is not supported"), std::string::npos);
  json block = formats::fp8_quantization_config({});
  block["config_groups"]["group_0"]["weights"]["strategy"] = "block";
  EXPECT_NE(error_of(block).find("'block' scales are not supported"), std::string::npos);
}

TEST(formats::HfQuantConfig, RegexIsPythonReMatch) {
  EXPECT_TRUE(formats::regex_match_prefix(R"(model\.layers\.1\.)", "model.layers.1.mlp.up_proj"));  // prefix is enough
  EXPECT_FALSE(formats::regex_match_prefix(R"(layers\.1)", "model.layers.1.mlp"));                 // anchored at the start
  EXPECT_TRUE(formats::regex_match_prefix(R"(.*\.1\..*)", "model.layers.1.self_attn.q_proj"));
  EXPECT_FALSE(formats::regex_match_prefix(R"(.*\.1\..*)", "model.layers.21.self_attn.q_proj"));
}

}  // namespace
