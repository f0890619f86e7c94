// Special token ids, add_bos/add_eos and chat templates from tokenizer.json + tokenizer_config.json,
// as gguf-py's SpecialVocab (_try_load_from_tokenizer_json) reads them.
#include <cctype>
#include <string>
#include <vector>

#include "export_internal.h"
#include "mo/io/json_file.h"

namespace mo::tok::hfx {

namespace {

using gguf::Value;
using nlohmann::json;

struct AddFlags {
  std::optional<bool> bos, eos;
};

// The leading / trailing SpecialToken of TemplateProcessing's "single" says whether BOS / EOS is
// added; with no tokenizer_config.json they also name the BOS / EOS tokens.
void read_template(const json& processor, std::optional<std::string>& bos, std::optional<std::string>& eos, bool have_config,
                   AddFlags& add) {
  if (processor.is_null()) return;
  if (processor.value("type", "") == "Sequence") {
    for (const auto& p : processor.value("processors", json::array())) read_template(p, bos, eos, have_config, add);
    return;
  }
  if (processor.value("type", "") == "RobertaProcessing") {
    add.bos = add.eos = true;
    return;
  }
  if (processor.value("type", "") != "TemplateProcessing") return;
  const json single = processor.value("single", json::array());
  if (single.size() <= 1) return;
  const auto special_id = [](const json& item) -> std::optional<std::string> {
    if (item.contains("SpecialToken")) return item["SpecialToken"].value("id", "");
    return std::nullopt;
  };
  if (const auto first = special_id(single.front())) {
    if (!have_config) bos = first;
    add.bos = bos && *first == *bos;
  }
  if (const auto last = special_id(single.back())) {
    if (!have_config) eos = last;
    add.eos = eos && *last == *eos;
  }
}

void append_chat_templates(const json& templates, KeyValues& out) {
  if (templates.is_string()) {
    out.emplace_back("tokenizer.chat_template", Value::str(templates.get<std::string>()));
    return;
  }
  if (!templates.is_array()) return;
  // gguf-py add_chat_template: "default" is the main template, the others are named ones.
  std::optional<std::string> main;
  std::vector<std::string> names;
  for (const auto& choice : templates) {
    if (!choice.is_object() || !choice.contains("template") || !choice["template"].is_string()) continue;
    std::string name = choice.value("name", "");
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    if (name.empty()) continue;
    if (name == "default") {
      main = choice["template"].get<std::string>();
    } else {
      names.push_back(name);
      out.emplace_back("tokenizer.chat_template." + name, Value::str(choice["template"].get<std::string>()));
    }
  }
  if (!names.empty()) out.emplace_back("tokenizer.chat_templates", Value::array_of_strings(names));
  if (main) out.emplace_back("tokenizer.chat_template", Value::str(*main));
}

}  // namespace

std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.is_object()) return std::nullopt;
  const auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

std::optional<std::int64_t> hf_token_id(const json& tokenizer_json, const std::string& text) {
  for (const auto& t : tokenizer_json.value("added_tokens", json::array()))
    if (t.value("content", "") == text && t.contains("id")) return json_int<std::int64_t>(t["id"], "tokenizer.json", "added_tokens.id");
  const json& vocab = tokenizer_json.at("model").at("vocab");
  if (const auto it = vocab.find(text); it != vocab.end() && it->is_number_integer()) return it->get<std::int64_t>();
  return std::nullopt;
}

void append_special_kv(const json& tokenizer_json, const json& config, std::size_t n_tokens, KeyValues& out) {
  const bool have_config = config.is_object();
  std::optional<std::string> bos = config_token(config, "bos_token");
  std::optional<std::string> eos = config_token(config, "eos_token");
  std::optional<std::string> unk = config_token(config, "unk_token");
  const std::optional<std::string> pad = config_token(config, "pad_token");
  if (!unk) {
    const json& u = tokenizer_json.at("model").value("unk_token", json(nullptr));
    if (u.is_string()) unk = u.get<std::string>();
  }
  AddFlags add;
  read_template(tokenizer_json.value("post_processor", json(nullptr)), bos, eos, have_config, add);
  if (have_config) {
    if (const auto it = config.find("add_bos_token"); it != config.end() && it->is_boolean()) add.bos = it->get<bool>();
    if (const auto it = config.find("add_eos_token"); it != config.end() && it->is_boolean()) add.eos = it->get<bool>();
  }

  const std::pair<const char*, const std::optional<std::string>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &bos},
      {"tokenizer.ggml.eos_token_id", &eos},
      {"tokenizer.ggml.unknown_token_id", &unk},
      {"tokenizer.ggml.padding_token_id", &pad},
  };
  for (const auto& [key, text] : ids) {
    if (!*text) continue;
    const auto id = hf_token_id(tokenizer_json, **text);
    if (id && *id >= 0 && static_cast<std::size_t>(*id) < n_tokens) out.emplace_back(key, Value::u32(static_cast<std::uint32_t>(*id)));
  }
  if (add.bos) out.emplace_back("tokenizer.ggml.add_bos_token", Value::boolean(*add.bos));
  if (add.eos) out.emplace_back("tokenizer.ggml.add_eos_token", Value::boolean(*add.eos));
  if (have_config && config.contains("chat_template")) append_chat_templates(config["chat_template"], out);
}

}  // namespace mo::tok::hfx
