#include <fmt/format.h>

#include <filesystem>

#include "mo/core/error.h"
#include "mo/io/json_file.h"
#include "mo/model/model_source.h"

namespace mo::model {
namespace {

using nlohmann::json;

std::int64_t get_int(const json& c, const char* key, const std::string& src, std::optional<std::int64_t> fallback = std::nullopt) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) {
    if (fallback) return *fallback;
    throw UsageError(fmt::format("{}: missing key '{}' (an integer)", src, key));
  }
  if (!it->is_number_integer()) throw UsageError(fmt::format("{}: key '{}': expected an integer, got {}", src, key, it->dump()));
  return it->get<std::int64_t>();
}

bool get_bool(const json& c, const char* key, bool fallback, const std::string& src) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw UsageError(fmt::format("{}: key '{}': expected true or false, got {}", src, key, it->dump()));
  return it->get<bool>();
}

std::string stored_float_format(const json& c) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    auto it = c.find(key);
    if (it == c.end() || !it->is_string()) continue;
    std::string d = it->get<std::string>();
    if (d == "float32") return "fp32";
    if (d == "bfloat16") return "bf16";
    if (d == "float16") return "fp16";
  }
  return "fp16";
}

// Maps a checkpoint's quantization_config to one of our weight formats and its group size.
void apply_quantization_config(const json& q, ModelShape& shape, const std::string& src) {
  std::string method = q.value("quant_method", "");
  auto group = [&](const json& j) {
    return j.contains("group_size") && j["group_size"].is_number_integer() ? j["group_size"].get<std::int64_t>() : 128;
  };
  int bits = q.contains("bits") && q["bits"].is_number_integer() ? q["bits"].get<int>() : 0;
  if (method == "awq" && bits == 4) {
    shape.stored_format = "awq-int4";
    shape.stored_group_size = group(q);
  } else if (method == "gptq" && bits == 4) {
    shape.stored_format = "gptq-int4";
    shape.stored_group_size = group(q);
  } else if ((method == "gptq" && bits == 8) || method == "bitsandbytes_8bit") {
    shape.stored_format = "int8";
  } else if (method == "fp8" || method == "modelopt") {
    shape.stored_format = "fp8";
  } else if (method == "compressed-tensors") {
    // compressed-tensors keeps its scheme under config_groups.<name>.weights
    // Named: iterating items() of the temporary value() returns would read a destroyed object.
    const json groups = q.value("config_groups", json::object());
    for (const auto& [name, g] : groups.items()) {
      const json& w = g.value("weights", json::object());
      int nb = w.value("num_bits", 0);
      std::string type = w.value("type", "int");
      if (nb == 8 && type == "float")
        shape.stored_format = "fp8";
      else if (nb == 8)
        shape.stored_format = "int8";
      else if (nb == 4) {
        shape.stored_format = "gptq-int4";
        shape.stored_group_size =
            w.contains("group_size") && w["group_size"].is_number_integer() ? w["group_size"].get<std::int64_t>() : 128;
      }
      break;
    }
  } else {
    throw UsageError(
        fmt::format("{}: quantization_config.quant_method '{}' ({} bits) is not one this release can size (supported: awq 4-bit, gptq "
                    "4/8-bit, fp8, compressed-tensors)",
                    src, method, bits));
  }
}

double get_number(const json& c, const char* key, double fallback, const std::string& src) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw UsageError(fmt::format("{}: key '{}': expected a number, got {}", src, key, it->dump()));
  return it->get<double>();
}

RopeScaling parse_rope_scaling(const json& c, const std::string& src) {
  RopeScaling r;
  auto it = c.find("rope_scaling");
  if (it == c.end() || it->is_null()) return r;
  if (!it->is_object()) throw UsageError(fmt::format("{}: key 'rope_scaling': expected an object, got {}", src, it->dump()));
  const json& rs = *it;
  // Older configs name the kind "type", newer ones "rope_type".
  std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
  if (type == "default") return r;
  if (type != "linear" && type != "llama3") {
    throw UsageError(
        fmt::format("{}: rope_scaling type '{}' is not supported{} (supported: linear, llama3)", src, type, type == "yarn" ? " yet" : ""));
  }
  r.type = type;
  r.factor = get_number(rs, "factor", 1.0, src);
  if (type == "llama3") {
    r.low_freq_factor = get_number(rs, "low_freq_factor", 1.0, src);
    r.high_freq_factor = get_number(rs, "high_freq_factor", 4.0, src);
    r.original_max_position_embeddings = get_int(rs, "original_max_position_embeddings", src);
  }
  return r;
}

std::vector<std::int64_t> parse_eos(const json& c, const std::string& src) {
  auto it = c.find("eos_token_id");
  if (it == c.end() || it->is_null()) return {};
  if (it->is_number_integer()) return {it->get<std::int64_t>()};
  std::vector<std::int64_t> out;
  if (it->is_array()) {
    for (const auto& v : *it) {
      if (!v.is_number_integer()) throw UsageError(fmt::format("{}: key 'eos_token_id': expected integers, got {}", src, it->dump()));
      out.push_back(v.get<std::int64_t>());
    }
    return out;
  }
  throw UsageError(fmt::format("{}: key 'eos_token_id': expected an integer or a list, got {}", src, it->dump()));
}

}  // namespace

const char* supported_architectures() { return "llama (Llama 2/3, TinyLlama, SmolLM), mistral, qwen2, mixtral"; }

static ModelShape shape_from_config(const json& c, const std::string& src) {
  if (!c.is_object()) throw UsageError(fmt::format("{}: expected a JSON object", src));
  std::string type = c.value("model_type", "");
  if (type != "llama" && type != "mistral" && type != "qwen2" && type != "mixtral") {
    throw UsageError(fmt::format("{}: model_type '{}' is not supported (supported: {})", src, type, supported_architectures()));
  }
  ModelShape shape;
  Hparams& hp = shape.hp;
  hp.arch = type;
  hp.vocab_size = get_int(c, "vocab_size", src);
  hp.hidden_size = get_int(c, "hidden_size", src);
  hp.intermediate_size = get_int(c, "intermediate_size", src);
  hp.num_layers = get_int(c, "num_hidden_layers", src);
  hp.num_heads = get_int(c, "num_attention_heads", src);
  hp.num_kv_heads = get_int(c, "num_key_value_heads", src, hp.num_heads);
  const bool explicit_head_dim = c.contains("head_dim") && !c["head_dim"].is_null();
  hp.head_dim =
      get_int(c, "head_dim", src, hp.num_heads > 0 ? hp.hidden_size / hp.num_heads : 0);  // validate_hparams names a bad head count
  hp.context_length = get_int(c, "max_position_embeddings", src, 4096);
  hp.tied_embeddings = get_bool(c, "tie_word_embeddings", false, src);
  hp.qkv_bias = type == "qwen2" || get_bool(c, "attention_bias", false, src);
  hp.rms_norm_eps = get_number(c, "rms_norm_eps", 1e-6, src);
  hp.rope_theta = get_number(c, "rope_theta", 10000.0, src);
  hp.rope_scaling = parse_rope_scaling(c, src);
  hp.bos_token_id = get_int(c, "bos_token_id", src, -1);
  hp.eos_token_ids = parse_eos(c, src);
  if (auto act = c.find("hidden_act"); act != c.end() && !act->is_null()) {
    // The block computes SiLU-gated FFNs: another activation would give wrong outputs, not an error.
    if (!act->is_string() || (act->get<std::string>() != "silu" && act->get<std::string>() != "swish"))
      throw UsageError(fmt::format("{}: key 'hidden_act': expected \"silu\", got {}", src, act->dump()));
  }
  validate_hparams(hp, src,
                   {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                    explicit_head_dim ? "head_dim" : "hidden_size / num_attention_heads", "max_position_embeddings", "rms_norm_eps",
                    "rope_theta", "bos_token_id", "eos_token_id", "rope_scaling"});
  if (type == "mixtral") {
    hp.num_experts = get_int(c, "num_local_experts", src);
    hp.num_experts_used = get_int(c, "num_experts_per_tok", src);
  }
  shape.stored_format = stored_float_format(c);
  if (auto q = c.find("quantization_config"); q != c.end() && q->is_object()) apply_quantization_config(*q, shape, src);
  shape.tensors = tensors_from_hparams(hp);
  return shape;
}

ModelShape shape_from_hf_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::string file = path;
  if (fs::is_directory(path)) {
    file = (fs::path(path) / "config.json").string();
    if (!fs::exists(file)) throw UsageError(fmt::format("{}: no config.json in this directory (expected an HF model directory)", path));
  }
  ModelShape shape = shape_from_hf_config(io::read_json(file), file);
  fs::path p = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  shape.name = fs::weakly_canonical(p).filename().string();
  return shape;
}

ModelShape shape_from_hf_config(const json& c, const std::string& src) {
  return reading_json(src, [&] { return shape_from_config(c, src); });
}

}  // namespace mo::model
