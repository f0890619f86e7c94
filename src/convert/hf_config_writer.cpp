#include "mo/convert/convert.h"

namespace mo::convert {

nlohmann::json hf_config_json(const model::Hparams& hp, const std::string& torch_dtype) {
  const bool qwen = hp.arch == "qwen2";
  const bool mistral = hp.arch == "mistral";
  const bool mixtral = hp.arch == "mixtral";
  nlohmann::json c;
  c["architectures"] = {qwen ? "Qwen2ForCausalLM" : mistral ? "MistralForCausalLM" : mixtral ? "MixtralForCausalLM" : "LlamaForCausalLM"};
  c["model_type"] = hp.arch;
  c["hidden_act"] = "silu";
  c["hidden_size"] = hp.hidden_size;
  c["intermediate_size"] = hp.intermediate_size;
  c["num_hidden_layers"] = hp.num_layers;
  c["num_attention_heads"] = hp.num_heads;
  c["num_key_value_heads"] = hp.num_kv_heads;
  c["head_dim"] = hp.head_dim;
  c["max_position_embeddings"] = hp.context_length > 0 ? hp.context_length : 4096;
  c["rms_norm_eps"] = hp.rms_norm_eps;
  c["rope_theta"] = hp.rope_theta;
  if (hp.rope_scaling.type == "linear") {
    c["rope_scaling"] = {{"type", "linear"}, {"factor", hp.rope_scaling.factor}};
  } else if (hp.rope_scaling.type == "llama3" && hp.rope_scaling.original_max_position_embeddings > 0) {
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", hp.rope_scaling.factor},
                         {"low_freq_factor", hp.rope_scaling.low_freq_factor},
                         {"high_freq_factor", hp.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", hp.rope_scaling.original_max_position_embeddings}};
  } else {
    c["rope_scaling"] = nullptr;
  }
  c["tie_word_embeddings"] = hp.tied_embeddings;
  c["vocab_size"] = hp.vocab_size;
  if (!qwen) c["attention_bias"] = hp.qkv_bias;
  if (hp.bos_token_id >= 0) c["bos_token_id"] = hp.bos_token_id;
  if (hp.eos_token_ids.size() == 1)
    c["eos_token_id"] = hp.eos_token_ids[0];
  else if (!hp.eos_token_ids.empty())
    c["eos_token_id"] = hp.eos_token_ids;
  if (mixtral) {
    c["num_local_experts"] = hp.num_experts;
    c["num_experts_per_tok"] = hp.num_experts_used;
  }
  c["torch_dtype"] = torch_dtype;
  c["use_cache"] = true;
  return c;
}

nlohmann::json hf_generation_config_json(const model::Hparams& hp) {
  nlohmann::json gen = {{"_from_model_config", true}};
  if (hp.bos_token_id >= 0) gen["bos_token_id"] = hp.bos_token_id;
  if (!hp.eos_token_ids.empty())
    gen["eos_token_id"] = hp.eos_token_ids.size() == 1 ? nlohmann::json(hp.eos_token_ids[0]) : nlohmann::json(hp.eos_token_ids);
  return gen;
}

}  // namespace mo::convert
