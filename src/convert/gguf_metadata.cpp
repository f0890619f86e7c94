#include "mo/convert/gguf_metadata.h"

#include <filesystem>

#include "mo/io/gguf.h"
#include "mo/io/json_file.h"
#include "mo/tokenizer/tokenizer_export.h"

namespace mo::convert {
namespace {

namespace fs = std::filesystem;
using gguf::Value;

void set_arch_keys(gguf::Writer& w, const model::Hparams& hp, const std::string& arch) {
  auto key = [&](const char* k) { return arch + "." + k; };
  w.set(key("context_length"), Value::u32(static_cast<std::uint32_t>(hp.context_length)));
  w.set(key("embedding_length"), Value::u32(static_cast<std::uint32_t>(hp.hidden_size)));
  w.set(key("block_count"), Value::u32(static_cast<std::uint32_t>(hp.num_layers)));
  w.set(key("feed_forward_length"), Value::u32(static_cast<std::uint32_t>(hp.intermediate_size)));
  w.set(key("rope.dimension_count"), Value::u32(static_cast<std::uint32_t>(hp.head_dim)));
  w.set(key("attention.head_count"), Value::u32(static_cast<std::uint32_t>(hp.num_heads)));
  w.set(key("attention.head_count_kv"), Value::u32(static_cast<std::uint32_t>(hp.num_kv_heads)));
  w.set(key("attention.layer_norm_rms_epsilon"), Value::f32(static_cast<float>(hp.rms_norm_eps)));
  w.set(key("rope.freq_base"), Value::f32(static_cast<float>(hp.rope_theta)));
  if (hp.head_dim * hp.num_heads != hp.hidden_size) {
    w.set(key("attention.key_length"), Value::u32(static_cast<std::uint32_t>(hp.head_dim)));
    w.set(key("attention.value_length"), Value::u32(static_cast<std::uint32_t>(hp.head_dim)));
  }
  if (hp.rope_scaling.type == "linear") {
    w.set(key("rope.scaling.type"), Value::str("linear"));
    w.set(key("rope.scaling.factor"), Value::f32(static_cast<float>(hp.rope_scaling.factor)));
  }
  w.set(key("vocab_size"), Value::u32(static_cast<std::uint32_t>(hp.vocab_size)));
}

nlohmann::json read_optional_json(const fs::path& p) { return fs::exists(p) ? io::read_json(p.string()) : nlohmann::json(); }

// Keys that describe the file rather than the model: the writer of the new file sets its own.
bool describes_the_file(const std::string& key) {
  return key == "general.file_type" || key == "general.quantization_version" || key == "general.alignment" ||
         key.rfind("model-optimizer.", 0) == 0 || key.rfind("quantize.", 0) == 0;
}

}  // namespace

std::string gguf_arch_name(const model::Hparams& hp) { return hp.arch == "qwen2" ? "qwen2" : "llama"; }

void set_model_keys(gguf::Writer& w, const model::ModelFiles& in, std::vector<std::string>& notes) {
  if (const gguf::File* g = in.gguf()) {
    for (const auto& [k, v] : g->metadata)
      if (!describes_the_file(k)) w.set(k, v);
    return;
  }
  const model::Hparams& hp = in.shape().hp;
  set_arch_keys(w, hp, gguf_arch_name(hp));
  const fs::path dir(in.path());
  if (!in.tokenizer_path().empty()) {
    auto kv = tok::gguf_tokenizer_kv_from_hf(io::read_json(in.tokenizer_path()), read_optional_json(dir / "tokenizer_config.json"),
                                             hp.vocab_size);
    for (auto& [k, v] : kv) w.set(k, std::move(v));
  } else {
    notes.push_back("the input has no tokenizer.json: no tokenizer metadata written");
  }
  if (!in.chat_template().empty() && !w.find("tokenizer.chat_template")) w.set("tokenizer.chat_template", Value::str(in.chat_template()));
}

}  // namespace mo::convert
