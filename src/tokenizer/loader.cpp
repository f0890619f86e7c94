// Picks the tokenizer implementation for a tokenizer.json or a GGUF file.
#include <filesystem>

#include "factories.h"
#include "mo/core/error.h"
#include "mo/io/gguf.h"
#include "mo/io/json_file.h"

namespace mo::tok {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSupportedJson =
    "supported: BPE with a ByteLevel pre-tokenizer or decoder (GPT-2, Llama 3, Qwen), "
    "BPE with byte_fallback and \xe2\x96\x81 for spaces (Llama 2, Mistral)";

bool has_type(const json& j, const std::string& type) {
  if (j.is_object()) {
    if (j.value("type", "") == type) return true;
    for (const auto& [key, v] : j.items()) {
      if (v.is_structured() && has_type(v, type)) return true;
    }
  } else if (j.is_array()) {
    for (const auto& v : j) {
      if (has_type(v, type)) return true;
    }
  }
  return false;
}

// A normalizer that writes "▁" for spaces: Prepend("▁") or Replace(" ", "▁") anywhere in it.
bool writes_metaspace(const json& normalizer) {
  const std::string meta = "\xe2\x96\x81";
  if (normalizer.is_array()) {
    for (const auto& n : normalizer) {
      if (writes_metaspace(n)) return true;
    }
    return false;
  }
  if (!normalizer.is_object()) return false;
  const std::string type = normalizer.value("type", "");
  if (type == "Prepend") return normalizer.value("prepend", "") == meta;
  if (type == "Replace") return normalizer.value("content", "") == meta;
  if (type == "Sequence") return writes_metaspace(normalizer.value("normalizers", json::array()));
  return false;
}

}  // namespace

namespace {
std::unique_ptr<Tokenizer> load_checked_tokenizer_json(const std::string& path);
}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  return reading_json(path, [&] { return load_checked_tokenizer_json(path); });
}

namespace {
std::unique_ptr<Tokenizer> load_checked_tokenizer_json(const std::string& path) {
  fs::path file = path;
  if (fs::is_directory(file)) {
    file /= "tokenizer.json";
    if (!fs::exists(file)) throw UsageError(path + ": no tokenizer.json in this directory");
  }
  require_readable(file.string(), "tokenizer file");
  const std::string source = file.string();
  const json tokenizer = io::read_json(source);
  json config;
  const fs::path config_path = file.parent_path() / "tokenizer_config.json";
  if (fs::exists(config_path)) config = io::read_json(config_path.string());

  if (!tokenizer.is_object() || !tokenizer.contains("model") || !tokenizer["model"].is_object()) {
    throw Error(source + ": key 'model' is missing; not a Hugging Face tokenizer.json");
  }
  const json& model = tokenizer["model"];
  // Old files leave out model.type when it is BPE.
  const std::string type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (type != "BPE") {
    throw Error(source + ": model.type '" + type + "' is not supported (" + kSupportedJson + ")");
  }
  const json pre = tokenizer.value("pre_tokenizer", json());
  const json decoder = tokenizer.value("decoder", json());
  if (has_type(pre, "ByteLevel") || has_type(decoder, "ByteLevel")) return make_bpe_from_json(tokenizer, config, source);
  const bool byte_fallback = model.value("byte_fallback", false);
  if (byte_fallback || has_type(pre, "Metaspace") || writes_metaspace(tokenizer.value("normalizer", json()))) {
    return make_spm_from_json(tokenizer, config, source);
  }
  throw Error(source + ": BPE without a ByteLevel pre-tokenizer, byte_fallback or a \xe2\x96\x81 normalizer is not supported (" +
              kSupportedJson + ")");
}
}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_gguf(const gguf::File& file) {
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model == "llama") return make_spm_from_gguf(file);
  if (model == "gpt2") return make_bpe_from_gguf(file);
  throw Error(file.path + ": tokenizer.ggml.model '" + model +
              "' is not supported (supported: 'llama' for SentencePiece-style BPE, 'gpt2' for byte-level BPE)");
}

}  // namespace mo::tok
