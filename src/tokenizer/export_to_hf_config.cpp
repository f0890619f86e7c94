// tokenizer_config.json and special_tokens_map.json for a GGUF vocabulary, with the keys
// transformers' save_pretrained writes for LlamaTokenizerFast / PreTrainedTokenizerFast.
#include <string>

#include "export_internal.h"

namespace mo::tok::hfx {

namespace {

using nlohmann::json;

json token_text(const GgufVocab& v, const std::optional<std::int32_t>& id) {
  if (!id) return nullptr;
  return v.tokens[*id];
}

json chat_template_json(const GgufVocab& v) {
  if (v.named_chat_templates.empty()) return v.chat_template ? json(*v.chat_template) : json(nullptr);
  // Several templates: transformers' list form, as gguf-py's add_chat_template reads it.
  json list = json::array();
  if (v.chat_template) list.push_back({{"name", "default"}, {"template", *v.chat_template}});
  for (const auto& [name, text] : v.named_chat_templates) list.push_back({{"name", name}, {"template", text}});
  return list;
}

}  // namespace

json hf_tokenizer_config(const GgufVocab& v, const HfPlan& plan) {
  json added = json::object();
  for (std::size_t i = 0; i < v.tokens.size(); ++i) {
    const auto t = v.types[i];
    if (t != kTypeUnknown && t != kTypeControl && t != kTypeUserDefined) continue;
    json entry = added_token_json(static_cast<std::int64_t>(i), v.tokens[i], t != kTypeUserDefined);
    entry.erase("id");
    added[std::to_string(i)] = std::move(entry);
  }
  json cfg = {{"add_bos_token", plan.add_bos},
              {"add_eos_token", plan.add_eos},
              {"added_tokens_decoder", std::move(added)},
              {"bos_token", token_text(v, v.bos)},
              {"eos_token", token_text(v, v.eos)},
              {"unk_token", token_text(v, v.unk)},
              {"pad_token", token_text(v, v.pad)},
              {"clean_up_tokenization_spaces", plan.clean_spaces},
              {"tokenizer_class", plan.spm ? "LlamaTokenizerFast" : "PreTrainedTokenizerFast"}};
  if (plan.spm) {
    // LlamaConverter's legacy layout (Prepend normalizer): a space is put in front of the text after
    // every special token too, as llama.cpp does.
    cfg["legacy"] = true;
  } else {
    // Names sharing one pre-tokenizer ("mpt" and "gpt-2") cannot be told apart from tokenizer.json;
    // gguf_tokenizer_kv_from_hf reads the name back from here.
    cfg["gguf_tokenizer_pre"] = plan.pre;
  }
  if (json t = chat_template_json(v); !t.is_null()) cfg["chat_template"] = std::move(t);
  if (v.context_length) cfg["model_max_length"] = *v.context_length;
  return cfg;
}

json hf_special_tokens_map(const GgufVocab& v) {
  json out = json::object();
  const std::pair<const char*, const std::optional<std::int32_t>*> specials[] = {
      {"bos_token", &v.bos}, {"eos_token", &v.eos}, {"unk_token", &v.unk}, {"pad_token", &v.pad}};
  for (const auto& [name, id] : specials) {
    if (!*id) continue;
    out[name] = {{"content", v.tokens[**id]}, {"lstrip", false}, {"normalized", false}, {"rstrip", false}, {"single_word", false}};
  }
  return out;
}

}  // namespace mo::tok::hfx
