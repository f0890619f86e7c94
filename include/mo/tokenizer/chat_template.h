#pragma once
// Chat templates: the Jinja template a model ships (tokenizer_config.json `chat_template`, GGUF
// `tokenizer.chat_template`) rendered for a list of messages the way HF transformers'
// apply_chat_template renders it with jinja2 (trim_blocks, lstrip_blocks, loop controls,
// raise_exception, strftime_now, a tojson that keeps non-ASCII text).
//
// The Jinja subset: {{ }}, {% if/elif/else %}, {% for %} (with else, `if` filter, loop.*, break,
// continue), {% set %} (names, tuples, namespace attributes, blocks), {% filter %}, {% generation %},
// comments, raw blocks and whitespace control; Python-like values (None, bool, int, float, str,
// list, dict) with their operators, slicing and the usual str/dict methods; the filters and tests
// the common templates use. Macros, call blocks, includes and inheritance are not supported.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "mo/core/error.h"

namespace mo::gguf {
struct File;
}

namespace mo::tok {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;  // end with the header that makes the model answer as the assistant
  std::string bos_token;              // the template's `bos_token`, e.g. "<s>" (tokenizer_config.json or GGUF)
  std::string eos_token;              // the template's `eos_token`, e.g. "</s>"
  // More template variables (tools, enable_thinking, date_string, ...); they override the ones above.
  nlohmann::json extra_context = nlohmann::json::object();
};

class ChatTemplateError : public Error {
 public:
  enum class Kind {
    kSyntax,       // the template does not parse (jinja2 would refuse it too)
    kUnsupported,  // valid Jinja that this subset does not implement (macro, an unknown filter, ...)
    kRaised,       // the template called raise_exception("...")
    kRuntime,      // evaluation failed as it would in jinja2 (attribute of an undefined value, 'a' + 1, ...)
    kLimit,        // nesting, evaluation steps, string or list sizes past the bounds in jinja_limits.h
  };
  ChatTemplateError(Kind kind, std::string message, int line, int column);

  Kind kind() const { return kind_; }
  // The message without the position, e.g. the text given to raise_exception.
  const std::string& message() const { return message_; }
  int line() const { return line_; }      // 1-based line in the template
  int column() const { return column_; }  // 1-based byte column in that line

 private:
  Kind kind_;
  std::string message_;
  int line_;
  int column_;
};

// Renders `tmpl` with messages, add_generation_prompt, bos_token, eos_token, tools = None and
// documents = None (what transformers passes), then `opt.extra_context`. Throws ChatTemplateError.
std::string render_chat_template(const std::string& tmpl, const std::vector<ChatMessage>& messages, const ChatTemplateOptions& opt);

// Renders `tmpl` with `context` as the template variables (an object: messages with tool_calls,
// tools, ...). An ordered_json keeps keys in input order, as Python dicts do, which tojson and
// dict.items() show. Throws ChatTemplateError.
std::string render_chat_template(const std::string& tmpl, const nlohmann::ordered_json& context);

// The plain ChatML rendering: "<|im_start|>role\ncontent<|im_end|>\n" per message, then
// "<|im_start|>assistant\n" when add_generation_prompt.
std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt);

// render_chat_template, except that an empty template falls back to render_chatml with a warning. A
// template that cannot run throws ChatTemplateError: ChatML would silently give the model a prompt it
// was not trained on (check_chat_template refuses such a template when the model is loaded).
std::string render_chat(const std::string& tmpl, const std::vector<ChatMessage>& messages, const ChatTemplateOptions& opt);

// Parses `tmpl` (an empty one is fine: ChatML). Throws UsageError "<where>: the model's chat template
// cannot be used: ... (line, column)" for a template that does not parse or uses what this subset lacks.
void check_chat_template(const std::string& tmpl, const std::string& where);

// The template a model ships and the special tokens it refers to.
struct ModelChatTemplate {
  std::string tmpl;  // empty when the model has none
  std::string bos_token;
  std::string eos_token;
};

// From a parsed tokenizer_config.json: `chat_template` as a string, or a list of {name, template}
// of which "default" is taken; bos_token/eos_token as strings or {"content": ...} objects.
ModelChatTemplate chat_template_from_tokenizer_config(const nlohmann::json& config);
// From GGUF metadata: tokenizer.chat_template and the texts of tokenizer.ggml.bos/eos_token_id.
ModelChatTemplate chat_template_from_gguf(const gguf::File& file);
// A model's template: from its GGUF metadata when `gguf` is given, else from `model_dir`/tokenizer_config.json
// when that exists, else none.
ModelChatTemplate chat_template_of_model(const gguf::File* gguf, const std::string& model_dir);

}  // namespace mo::tok
