#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "mo/model/model_presets.h"
#include "mo/core/error.h"
#include "mo/model/model_source.h"

namespace {

using nlohmann::json;

json llama2_7b_config() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": false, "torch_dtype": "float16", "vocab_size": 32000})");
}

TEST(HfConfig, LlamaConfigGivesThePresetShape) {
  auto s = mo::model::shape_from_hf_config(llama2_7b_config(), "config.json");
  auto p = mo::model::load_model_shape("llama-2-7b");
  EXPECT_EQ(s.n_params(), p.n_params());
  EXPECT_EQ(s.n_params(), 6738415616u);  // Llama-2-7b-hf's parameter count
  EXPECT_EQ(s.hp.head_dim, 128);
  EXPECT_EQ(s.stored_format, "fp16");
}

TEST(HfConfig, Qwen2HasQkvBiasAndBf16) {
  auto c = json::parse(R"({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "vocab_size": 151936,
    "max_position_embeddings": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})");
  auto s = mo::model::shape_from_hf_config(c, "config.json");
  EXPECT_TRUE(s.hp.qkv_bias);
  EXPECT_EQ(s.stored_format, "bf16");
  EXPECT_NEAR(s.n_params() / 494e6, 1.0, 0.01);  // Qwen2.5-0.5B: 494 M parameters
}

TEST(HfConfig, AwqQuantizationConfigSetsFormatAndGroup) {
  auto c = llama2_7b_config();
  c["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 64}, {"zero_point", true}, {"version", "gemm"}};
  auto s = mo::model::shape_from_hf_config(c, "config.json");
  EXPECT_EQ(s.stored_format, "awq-int4");
  EXPECT_EQ(s.stored_group_size, 64);
}

TEST(HfConfig, UnsupportedArchitectureListsSupportedOnes) {
  auto c = llama2_7b_config();
  c["model_type"] = "gpt2";
  try {
    mo::model::shape_from_hf_config(c, "models/x/config.json");
    FAIL();
  } catch (const mo::UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "models/x/config.json: model_type 'gpt2' is not supported (supported: llama (Llama 2/3, TinyLlama, SmolLM), mistral, qwen2, "
              "mixtral)");
  }
}

TEST(HfConfig, MissingOrWrongTypedKeyIsNamed) {
  auto c = llama2_7b_config();
  c.erase("hidden_size");
  EXPECT_THROW(
      {
        try {
          mo::model::shape_from_hf_config(c, "config.json");
        } catch (const mo::UsageError& e) {
          EXPECT_EQ(std::string(e.what()), "config.json: missing key 'hidden_size' (an integer)");
          throw;
        }
      },
      mo::UsageError);
  c = llama2_7b_config();
  c["num_hidden_layers"] = "32";
  try {
    mo::model::shape_from_hf_config(c, "config.json");
    FAIL();
  } catch (const mo::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "config.json: key 'num_hidden_layers': expected an integer, got \"32\"");
  }
}

TEST(GgufShape, Stories260KHasItsPublishedShape) {
  std::string path = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!std::ifstream(path)) GTEST_SKIP() << path << " not found";
  auto s = mo::model::load_model_shape(path);
  EXPECT_EQ(s.hp.hidden_size, 64);
  EXPECT_EQ(s.hp.num_layers, 5);
  EXPECT_EQ(s.hp.num_heads, 8);
  EXPECT_EQ(s.hp.num_kv_heads, 4);
  EXPECT_EQ(s.hp.intermediate_size, 172);
  EXPECT_EQ(s.hp.vocab_size, 512);
  EXPECT_FALSE(s.hp.tied_embeddings);  // the file stores output.weight as its own tensor
  EXPECT_EQ(s.stored_format, "gguf");
}

}  // namespace

namespace {

TEST(HfConfig, Llama31RopeScalingAndEosListAreRead) {
  auto c = nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "torch_dtype": "bfloat16"})");
  auto s = mo::model::shape_from_hf_config(c, "config.json");
  EXPECT_EQ(s.hp.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(s.hp.rope_scaling.factor, 8.0);
  EXPECT_EQ(s.hp.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(s.hp.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(s.hp.rms_norm_eps, 1e-5);
  EXPECT_EQ(s.hp.bos_token_id, 128000);
  EXPECT_EQ(s.hp.eos_token_ids, (std::vector<std::int64_t>{128001, 128008, 128009}));
}

TEST(HfConfig, LinearRopeScalingAndUnsupportedKinds) {
  auto c = nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 172,
    "num_attention_heads": 8, "num_hidden_layers": 1, "vocab_size": 512, "rope_scaling": {"type": "linear", "factor": 4.0}})");
  EXPECT_EQ(mo::model::shape_from_hf_config(c, "config.json").hp.rope_scaling.type, "linear");
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  try {
    mo::model::shape_from_hf_config(c, "config.json");
    FAIL();
  } catch (const mo::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "config.json: rope_scaling type 'yarn' is not supported yet (supported: linear, llama3)");
  }
}

TEST(GgufShape, Stories260KNormAndRopeSettings) {
  std::string path = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!std::ifstream(path)) GTEST_SKIP() << path << " not found";
  auto s = mo::model::load_model_shape(path);
  EXPECT_FLOAT_EQ(static_cast<float>(s.hp.rms_norm_eps), 1e-5f);  // stored as f32
  EXPECT_DOUBLE_EQ(s.hp.rope_theta, 10000.0);                     // no rope.freq_base key: llama.cpp's default
  EXPECT_EQ(s.hp.rope_scaling.type, "none");
  EXPECT_EQ(s.hp.bos_token_id, 1);
  EXPECT_EQ(s.hp.eos_token_ids, (std::vector<std::int64_t>{2}));
}

}  // namespace

// Numbers a file gives that become sizes, divisors or float parameters are checked with their ranges.
TEST(HfConfig, OutOfRangeHyperparametersNameTheKey) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"max_position_embeddings", 4294967295LL}},
       "key 'max_position_embeddings': expected a token count in [1, 16777216], got 4294967295"},
      {{{"max_position_embeddings", 2147483648LL}}, "key 'max_position_embeddings'"},
      // 0 was served as a default length nobody chose.
      {{{"max_position_embeddings", 0}}, "key 'max_position_embeddings': expected a token count in [1, 16777216], got 0"},
      {{{"num_hidden_layers", 0}}, "key 'num_hidden_layers': expected an integer in [1, 65536], got 0"},
      {{{"hidden_size", 0}}, "key 'hidden_size': expected an integer in [1, 16777216], got 0"},
      {{{"intermediate_size", 1LL << 40}}, "key 'intermediate_size': expected an integer in [1, 16777216], got 1099511627776"},
      {{{"num_attention_heads", 0}}, "key 'num_attention_heads': expected an integer in [1, 65536], got 0"},
      {{{"num_key_value_heads", 3}}, "key 'num_key_value_heads': expected a divisor of 32 (num_attention_heads: 32), got 3"},
      {{{"head_dim", 7}}, "key 'head_dim': expected an even integer in [2, 65536], got 7"},
      {{{"num_attention_heads", 4096}, {"num_key_value_heads", 4096}},
       "key 'hidden_size / num_attention_heads': expected an even integer in [2, 65536], got 1"},
      {{{"rms_norm_eps", 0.0}}, "key 'rms_norm_eps': expected a number in (0, 1), got 0"},
      {{{"rms_norm_eps", -1e-5}}, "key 'rms_norm_eps'"},
      {{{"rope_theta", 1.8446744073709552e19}}, "key 'rope_theta': expected a number in (1, 1e12]"},
      {{{"hidden_act", 7}}, "key 'hidden_act': expected \"silu\", got 7"},
      {{{"hidden_act", "gelu"}}, "key 'hidden_act': expected \"silu\", got \"gelu\""},
      {{{"bos_token_id", 32000}}, "key 'bos_token_id': expected a token id in [0, 32000), got 32000"},
      {{{"eos_token_id", json::array({2, -7})}}, "key 'eos_token_id': expected token ids in [0, 32000), got -7"},
      // RoPE scaling is narrowed to float and divided by: 1e300 was undefined behaviour, 0 a division by zero.
      {{{"rope_scaling", {{"type", "linear"}, {"factor", 1e300}}}}, "key 'rope_scaling.factor': expected a number in (0, 1e6], got 1e+300"},
      {{{"rope_scaling", {{"type", "linear"}, {"factor", 0}}}}, "key 'rope_scaling.factor'"},
      {{{"rope_scaling",
         {{"rope_type", "llama3"},
          {"factor", 8.0},
          {"low_freq_factor", 4.0},
          {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", 8192}}}},
       "key 'rope_scaling.high_freq_factor': expected a number in (4, 1e6] (above low_freq_factor), got 4"},
      {{{"rope_scaling",
         {{"rope_type", "llama3"},
          {"factor", 8.0},
          {"low_freq_factor", 1.0},
          {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", 0}}}},
       "key 'rope_scaling.original_max_position_embeddings': expected a token count in [1, 16777216], got 0"},
  };
  for (const auto& [patch, expected] : cases) {
    auto c = llama2_7b_config();
    c.update(patch);
    try {
      mo::model::shape_from_hf_config(c, "m/config.json");
      ADD_FAILURE() << "accepted " << patch.dump();
    } catch (const mo::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("m/config.json: " + expected), std::string::npos) << e.what();
    }
  }
  auto ok = llama2_7b_config();
  ok["hidden_act"] = "silu";
  EXPECT_NO_THROW(mo::model::shape_from_hf_config(ok, "m/config.json"));
}
