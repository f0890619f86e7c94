#include "mo/tokenizer/chat_template.h"

#include "jinja_interpreter.h"
#include "jinja_parser.h"
#include "mo/core/log.h"
#include "mo/io/gguf.h"

namespace mo::tok {

namespace {

std::string position_suffix(int line, int column) {
  return " (chat template line " + std::to_string(line) + ", column " + std::to_string(column) + ")";
}

// bos_token/eos_token in tokenizer_config.json: a string, or an AddedToken object {"content": ...}.
std::string token_text(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

}  // namespace

ChatTemplateError::ChatTemplateError(Kind kind, std::string message, int line, int column)
    : Error(message + position_suffix(line, column)), kind_(kind), message_(std::move(message)), line_(line), column_(column) {}

std::string render_chat_template(const std::string& tmpl, const nlohmann::ordered_json& context) {
  if (!context.is_object()) throw Error("chat template context must be a JSON object");
  const jinja::Body body = jinja::parse_template(tmpl);
  const jinja::Value vars = jinja::from_json(context);
  return jinja::render(body, vars.as_dict());
}

std::string render_chat_template(const std::string& tmpl, const std::vector<ChatMessage>& messages, const ChatTemplateOptions& opt) {
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  context["messages"] = std::move(list);
  context["tools"] = nullptr;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = opt.add_generation_prompt;
  context["bos_token"] = opt.bos_token;
  context["eos_token"] = opt.eos_token;
  if (!opt.extra_context.is_null() && !opt.extra_context.is_object())
    throw Error("ChatTemplateOptions::extra_context must be a JSON object");
  if (opt.extra_context.is_object())
    for (auto it = opt.extra_context.begin(); it != opt.extra_context.end(); ++it)
      context[it.key()] = nlohmann::ordered_json::parse(it.value().dump());
  return render_chat_template(tmpl, context);
}

std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_chat(const std::string& tmpl, const std::vector<ChatMessage>& messages, const ChatTemplateOptions& opt) {
  if (tmpl.empty()) {
    log::warn("the model has no chat template; using ChatML");
    return render_chatml(messages, opt.add_generation_prompt);
  }
  return render_chat_template(tmpl, messages, opt);
}

void check_chat_template(const std::string& tmpl, const std::string& where) {
  if (tmpl.empty()) return;
  try {
    jinja::parse_template(tmpl);
  } catch (const ChatTemplateError& e) {
    throw UsageError(where + ": the model's chat template cannot be used: " + e.what());
  }
}

ModelChatTemplate chat_template_from_tokenizer_config(const nlohmann::json& config) {
  ModelChatTemplate out;
  out.bos_token = token_text(config, "bos_token");
  out.eos_token = token_text(config, "eos_token");
  const auto it = config.find("chat_template");
  if (it == config.end()) return out;
  if (it->is_string()) {
    out.tmpl = it->get<std::string>();
  } else if (it->is_array()) {
    for (const auto& named : *it)
      if (named.value("name", "") == "default" && named.contains("template") && named["template"].is_string())
        out.tmpl = named["template"].get<std::string>();
  }
  return out;
}

ModelChatTemplate chat_template_from_gguf(const gguf::File& file) {
  ModelChatTemplate out;
  if (const gguf::Value* t = file.find("tokenizer.chat_template"); t && t->type == gguf::ValueType::string) out.tmpl = t->as_string();
  const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
  auto token = [&](const char* key) -> std::string {
    const auto id = file.get_int_opt(key);
    if (!id || !tokens || tokens->type != gguf::ValueType::array) return "";
    const auto& list = tokens->as_array();
    if (*id < 0 || static_cast<std::size_t>(*id) >= list.size() || list[*id].type != gguf::ValueType::string) return "";
    return list[*id].as_string();
  };
  out.bos_token = token("tokenizer.ggml.bos_token_id");
  out.eos_token = token("tokenizer.ggml.eos_token_id");
  return out;
}

}  // namespace mo::tok
