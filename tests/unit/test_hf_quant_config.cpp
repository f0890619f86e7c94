// The quantization_config we write (keys vLLM / Transformers / compressed-tensors read) and the parser
// the engine loads checkpoints with.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/formats/hf_quant_config.h"

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using namespace mo::formats;

std::string error_of(const json& q) {
  try {
    parse_quantization_config(q);
  } catch (const mo::UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(HfQuantConfig, WritesAwqGemm) {
  AwqConfigOptions o;
  o.group_size = 64;
  EXPECT_EQ(awq_quantization_config(o), json::parse(R"({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true,
      "version": "gemm", "modules_to_not_convert": null})"));
  o.modules_to_not_convert = {"mlp"};
  EXPECT_EQ(awq_quantization_config(o)["modules_to_not_convert"], json::parse(R"(["mlp"])"));
}

TEST(HfQuantConfig, WritesGptqWithDynamicRules) {
  GptqConfigOptions o;
  o.bits = 4;
  o.group_size = 128;
  o.desc_act = true;
  o.sym = false;
  o.dynamic = {{R"(model\.layers\.1\..*)", false, {{"bits", 8}}}, {R"(.*\.mlp\..*)", true, json::object()}};
  EXPECT_EQ(gptq_quantization_config(o), json::parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "damp_percent": 0.01,
      "desc_act": true, "static_groups": false, "sym": false, "true_sequential": true, "lm_head": false,
      "checkpoint_format": "gptq", "dynamic": {"+:model\\.layers\\.1\\..*": {"bits": 8}, "-:.*\\.mlp\\..*": {}}})"));
  o.v2 = true;
  const json file = gptq_quantize_config_file(o);
  EXPECT_EQ(file["checkpoint_format"], "gptq_v2");
  EXPECT_TRUE(file["meta"]["quantizer"][0].get<std::string>().starts_with("model-optimizer:"));
}

TEST(HfQuantConfig, WritesCompressedTensorsFp8) {
  const json args = json::parse(R"({"num_bits": 8, "type": "float", "symmetric": true, "group_size": null, "strategy": "channel",
      "block_structure": null, "dynamic": false, "actorder": null, "observer": "minmax", "observer_kwargs": {}})");
  json act = args;
  act["strategy"] = "token", act["dynamic"] = true, act["observer"] = nullptr;
  const json expected = {
      {"quant_method", "compressed-tensors"},
      {"format", "float-quantized"},
      {"quantization_status", "compressed"},
      {"global_compression_ratio", nullptr},
      {"kv_cache_scheme", nullptr},
      {"ignore", {"lm_head"}},
      {"config_groups",
       {{"group_0", {{"targets", {"Linear"}}, {"weights", args}, {"input_activations", act}, {"output_activations", nullptr}}}}}};
  EXPECT_EQ(fp8_quantization_config({}), expected);
  Fp8ConfigOptions o;
  o.per_channel = false;
  o.activations = Fp8Activations::none;
  const json t = fp8_quantization_config(o);
  EXPECT_EQ(t["config_groups"]["group_0"]["weights"]["strategy"], "tensor");
  EXPECT_TRUE(t["config_groups"]["group_0"]["input_activations"].is_null());
}

// The parser against configs as the quantizers people use write them, typed here from their sources:
// Transformers' AwqConfig.to_dict() for an AutoAWQ checkpoint (extra keys included), AutoAWQ's own spelling
// (w_bit, q_group_size, "GEMM"), and llm-compressor's FP8_DYNAMIC scheme with a regex ignore. Modules are
// matched as Transformers and vLLM match them: modules_to_not_convert by substring, compressed-tensors'
// "re:" targets by re.match. Our writers' output must then read exactly as those do.
TEST(HfQuantConfig, ReadsConfigsAsTheQuantizersWriteThemAndOursAlike) {
  const std::vector<std::string> modules = {"model.layers.0.self_attn.q_proj", "model.layers.0.mlp.up_proj",
                                            "model.layers.3.mlp.down_proj",    "model.layers.1.mlp.gate",
                                            "model.layers.1.mlp.gate_proj",    "lm_head"};
  auto expect_same = [&](const HfQuantConfig& a, const HfQuantConfig& b, const char* what) {
    EXPECT_EQ(a.describe(), b.describe()) << what;
    for (const auto& m : modules) {
      EXPECT_EQ(a.module(m).quantized, b.module(m).quantized) << what << ": " << m;
      EXPECT_EQ(a.module(m).bits, b.module(m).bits) << what << ": " << m;
      EXPECT_EQ(a.module(m).group_size, b.module(m).group_size) << what << ": " << m;
    }
  };

  const auto transformers = parse_quantization_config(json::parse(R"({"backend": "autoawq", "bits": 4, "do_fuse": false,
      "exllama_config": null, "fuse_max_seq_len": null, "group_size": 64, "modules_to_fuse": null,
      "modules_to_not_convert": ["mlp"], "quant_method": "awq", "version": "gemm", "zero_point": true})"));
  EXPECT_EQ(transformers.describe(), "awq 4-bit g64 gemm");
  EXPECT_TRUE(transformers.module("model.layers.0.self_attn.q_proj").quantized);
  EXPECT_EQ(transformers.module("model.layers.0.self_attn.q_proj").bits, 4);
  EXPECT_EQ(transformers.module("model.layers.0.self_attn.q_proj").group_size, 64);
  EXPECT_FALSE(transformers.module("model.layers.0.mlp.up_proj").quantized);  // "mlp" is a substring of the name
  EXPECT_FALSE(transformers.module("lm_head").quantized);                     // AWQ never quantizes the LM head
  const auto autoawq = parse_quantization_config(
      json::parse(R"({"quant_method": "awq", "zero_point": true, "q_group_size": 64, "w_bit": 4, "version": "GEMM",
      "modules_to_not_convert": ["mlp"]})"));
  expect_same(transformers, autoawq, "AutoAWQ's spelling");
  expect_same(transformers, parse_quantization_config(awq_quantization_config({64, {"mlp"}})), "our AWQ config");

  const auto llm_compressor = parse_quantization_config(json::parse(R"({"config_groups": {"group_0": {
      "input_activations": {"actorder": null, "block_structure": null, "dynamic": true, "group_size": null, "num_bits": 8,
        "observer": null, "observer_kwargs": {}, "strategy": "token", "symmetric": true, "type": "float"},
      "output_activations": null, "targets": ["Linear"],
      "weights": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": null, "num_bits": 8,
        "observer": "minmax", "observer_kwargs": {}, "strategy": "channel", "symmetric": true, "type": "float"}}},
      "format": "float-quantized", "global_compression_ratio": 1.24, "ignore": ["lm_head", "re:.*mlp.gate$"],
      "kv_cache_scheme": null, "quant_method": "compressed-tensors", "quantization_status": "compressed"})"));
  EXPECT_EQ(llm_compressor.describe(), "fp8 e4m3 per-channel (dynamic per-token activations)");
  EXPECT_TRUE(llm_compressor.module("model.layers.3.mlp.down_proj").quantized);
  EXPECT_TRUE(llm_compressor.module("model.layers.1.mlp.gate_proj").quantized);  // the regex ends at "gate"
  EXPECT_FALSE(llm_compressor.module("model.layers.1.mlp.gate").quantized);
  EXPECT_FALSE(llm_compressor.module("lm_head").quantized);
  Fp8ConfigOptions o;
  o.ignore = {"lm_head", "re:.*mlp.gate$"};
  expect_same(llm_compressor, parse_quantization_config(fp8_quantization_config(o)), "our FP8 config");
}

TEST(HfQuantConfig, GptqDynamicRulesApplyFirstMatchInFileOrder) {
  // GPTQModel's example: skip layers 2+, 8-bit g32 for layer 1 (re.match: anchored at the start only).
  const auto q = ordered_json::parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true, "sym": true,
      "checkpoint_format": "gptq_v2", "dynamic": {"-:model\\.layers\\.([2-9]\\d*|[1-9]\\d+)\\..*": {},
      ".*\\.1\\..*": {"bits": 8, "group_size": 32, "desc_act": false}}})");
  const auto c = parse_quantization_config(q);
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
  const auto skip_first = parse_quantization_config(
      ordered_json::parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "dynamic": {"-:.*mlp.*": {}, "+:.*": {"bits": 8}}})"));
  EXPECT_FALSE(skip_first.module("model.layers.0.mlp.up_proj").quantized);
  EXPECT_EQ(skip_first.module("model.layers.0.self_attn.o_proj").bits, 8);
}

TEST(HfQuantConfig, DynamicPatternCoversVllmFusedLayers) {
  const std::string q = gptq_dynamic_pattern("model.layers.3.self_attn.q_proj");
  EXPECT_EQ(q, R"(model\.layers\.3\.self_attn\.(?:q_proj|qkv_proj)$)");
  EXPECT_TRUE(regex_match_prefix(q, "model.layers.3.self_attn.qkv_proj"));  // vLLM's name
  EXPECT_TRUE(regex_match_prefix(q, "model.layers.3.self_attn.q_proj"));    // ours
  EXPECT_FALSE(regex_match_prefix(q, "model.layers.33.self_attn.q_proj"));
  const std::string down = gptq_dynamic_pattern("model.layers.3.mlp.down_proj");
  EXPECT_EQ(down, R"(model\.layers\.3\.mlp\.down_proj$)");
  EXPECT_TRUE(regex_match_prefix(gptq_dynamic_pattern("model.layers.0.mlp.up_proj"), "model.layers.0.mlp.gate_up_proj"));
}

TEST(HfQuantConfig, Fp8IgnoreTakesNamesAndRegexes) {
  json q = fp8_quantization_config({});
  q["ignore"] = {"lm_head", "re:.*layers\\.0\\..*"};
  const auto c = parse_quantization_config(q);
  EXPECT_FALSE(c.module("model.layers.0.mlp.up_proj").quantized);
  EXPECT_TRUE(c.module("model.layers.10.mlp.up_proj").quantized);
}

TEST(HfQuantConfig, RejectsWhatItCannotLoadWithTheKey) {
  EXPECT_NE(error_of({{"quant_method", "bitsandbytes"}}).find("quant_method: 'bitsandbytes'"), std::string::npos);
  EXPECT_NE(error_of({{"quant_method", "awq"}, {"bits", 4}, {"version", "gemv"}}).find("'gemv' is not supported"), std::string::npos);
  EXPECT_NE(error_of({{"quant_method", "gptq"}, {"bits", 3}}).find("3-bit GPTQ"), std::string::npos);
  EXPECT_NE(error_of({{"quant_method", "gptq"}, {"bits", 4}, {"checkpoint_format", "marlin"}}).find("checkpoint_format: 'marlin'"),
            std::string::npos);
  EXPECT_NE(error_of({{"quant_method", "gptq"}, {"bits", "4"}}).find("quantization_config.bits: expected an integer"), std::string::npos);
  EXPECT_NE(error_of({{"quant_method", "gptq"}, {"bits", 4}, {"dynamic", {{"+:(", {{"bits", 8}}}}}}).find("quantization regex '('"),
            std::string::npos);
  json w4 = fp8_quantization_config({});
  w4["format"] = "pack-quantized";
  EXPECT_NE(error_of(w4).find("config_groups.group_0.weights: 8-bit float weights are not supported (pack-quantized"), std::string::npos);
  json sparse = fp8_quantization_config({});
  sparse["format"] = "sparse-24-bitmask";
  EXPECT_NE(error_of(sparse).find("format: compressed-tensors format 'sparse-24-bitmask' is not supported"), std::string::npos);
  json actorder = ct_pack_quantized_config({{{4, 32, true, {"m"}}}});
  actorder["config_groups"]["group_0"]["weights"]["actorder"] = "group";
  EXPECT_NE(error_of(actorder).find("group_0.weights.actorder: \"group\" (weight_g_idx) is not supported"), std::string::npos);
  json block = fp8_quantization_config({});
  block["config_groups"]["group_0"]["weights"]["strategy"] = "block";
  EXPECT_NE(error_of(block).find("'block' scales are not supported"), std::string::npos);
}

// Mixed precisions as llm-compressor writes them: one group per precision, each naming its modules.
TEST(HfQuantConfig, WritesAndParsesPackQuantizedGroupsPerPrecision) {
  CtPackedConfigOptions o;
  o.groups = {{4, 32, true, {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj"}},
              {8, -1, false, {"model.layers.0.mlp.down_proj"}}};
  o.ignore = {"lm_head", "model.layers.1.mlp.up_proj"};
  const json q = ct_pack_quantized_config(o);
  EXPECT_EQ(q["quant_method"], "compressed-tensors");
  EXPECT_EQ(q["format"], "pack-quantized");
  EXPECT_EQ(q["quantization_status"], "compressed");
  const json& g0 = q["config_groups"]["group_0"];
  const json w4 = json::parse(R"({"num_bits": 4, "type": "int", "symmetric": true, "group_size": 32, "strategy": "group",
      "block_structure": null, "dynamic": false, "actorder": null, "observer": "minmax", "observer_kwargs": {}})");
  EXPECT_EQ(g0["weights"], w4);
  EXPECT_TRUE(g0["input_activations"].is_null());
  EXPECT_EQ(q["config_groups"]["group_1"]["weights"]["strategy"], "channel");
  EXPECT_TRUE(q["config_groups"]["group_1"]["weights"]["group_size"].is_null());

  const auto c = parse_quantization_config(q);
  EXPECT_EQ(c.describe(), "compressed-tensors pack-quantized (int4 g32 sym, int8 per-channel asym)");
  const ModuleQuant k = c.module("model.layers.0.self_attn.k_proj");
  EXPECT_TRUE(k.quantized);
  EXPECT_EQ(k.bits, 4);
  EXPECT_EQ(k.group_size, 32);
  const ModuleQuant down = c.module("model.layers.0.mlp.down_proj");
  EXPECT_EQ(down.bits, 8);
  EXPECT_EQ(down.group_size, -1);
  EXPECT_FALSE(down.sym);
  EXPECT_FALSE(c.module("model.layers.1.mlp.up_proj").quantized);    // ignored
  EXPECT_FALSE(c.module("model.layers.1.mlp.gate_proj").quantized);  // in no group
  EXPECT_FALSE(c.module("lm_head").quantized);
}

TEST(HfQuantConfig, RegexIsPythonReMatch) {
  EXPECT_TRUE(regex_match_prefix(R"(model\.layers\.1\.)", "model.layers.1.mlp.up_proj"));  // prefix is enough
  EXPECT_FALSE(regex_match_prefix(R"(layers\.1)", "model.layers.1.mlp"));                  // anchored at the start
  EXPECT_TRUE(regex_match_prefix(R"(.*\.1\..*)", "model.layers.1.self_attn.q_proj"));
  EXPECT_FALSE(regex_match_prefix(R"(.*\.1\..*)", "model.layers.21.self_attn.q_proj"));
}

}  // namespace
