#include "mo/serve/openai_request.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>

#include "mo/core/error.h"

namespace mo::serve {

using nlohmann::json;

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

namespace {

ApiError bad(const std::string& param, const std::string& message) { return ApiError(400, fmt::format("{}: {}", param, message), param); }

std::string type_name(const json& v) { return v.type_name(); }

// Parameters a client may send; `user` is accepted and has no effect.
const std::set<std::string> kCommonKeys = {"model",
                                           "max_tokens",
                                           "temperature",
                                           "top_p",
                                           "top_k",
                                           "min_p",
                                           "presence_penalty",
                                           "frequency_penalty",
                                           "repetition_penalty",
                                           "seed",
                                           "stop",
                                           "stop_token_ids",
                                           "n",
                                           "stream",
                                           "stream_options",
                                           "user",
                                           "ignore_eos",
                                           "include_stop_str_in_output",
                                           "logit_bias"};
const std::set<std::string> kChatKeys = {"messages", "logprobs", "top_logprobs", "max_completion_tokens"};
const std::set<std::string> kCompletionKeys = {"prompt", "logprobs", "echo"};

const json* find(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const json& body, const char* key) {
  const json* v = find(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw bad(key, fmt::format("expected a number, got {}", type_name(*v)));
  const double d = v->get<double>();
  if (!std::isfinite(d)) throw bad(key, "expected a finite number");
  return d;
}

std::optional<std::int64_t> integer(const json& body, const char* key, std::int64_t lo, std::int64_t hi) {
  const json* v = find(body, key);
  if (!v) return std::nullopt;
  std::int64_t i = 0;
  if (v->is_number_unsigned()) {
    const auto u = v->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      throw bad(key, fmt::format("expected an integer in [{}, {}], got {}", lo, hi, u));
    i = static_cast<std::int64_t>(u);
  } else if (v->is_number_integer()) {
    i = v->get<std::int64_t>();
  } else {
    throw bad(key, fmt::format("expected an integer, got {}", type_name(*v)));
  }
  if (i < lo || i > hi) throw bad(key, fmt::format("expected an integer in [{}, {}], got {}", lo, hi, i));
  return i;
}

std::optional<bool> boolean(const json& body, const char* key) {
  const json* v = find(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw bad(key, fmt::format("expected true or false, got {}", type_name(*v)));
  return v->get<bool>();
}

std::vector<std::string> stop_strings(const json& body) {
  const json* v = find(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) throw bad("stop", fmt::format("expected a string or a list of strings, got {}", type_name(*v)));
  if (v->size() > 16) throw bad("stop", fmt::format("at most 16 stop strings, got {}", v->size()));
  std::vector<std::string> out;
  for (const json& s : *v) {
    if (!s.is_string()) throw bad("stop", fmt::format("expected a list of strings, found {}", type_name(s)));
    out.push_back(s.get<std::string>());
  }
  return out;
}

// {"token id": bias}, as OpenAI and vLLM take it: ids in [0, vocab) written as strings, biases in [-100, 100].
std::vector<std::pair<std::int32_t, float>> logit_bias(const json& body, std::int32_t vocab) {
  const json* v = find(body, "logit_bias");
  if (!v) return {};
  if (!v->is_object()) throw bad("logit_bias", fmt::format("expected an object mapping token ids to biases, got {}", type_name(*v)));
  std::vector<std::pair<std::int32_t, float>> out;
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    std::int64_t id = -1;
    if (!key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos) id = std::stoll(key);
    if (id < 0 || id >= vocab)
      throw bad("logit_bias", fmt::format("'{}' is not a token id; expected keys that are integers in [0, {})", key, vocab));
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < -100 || it->get<double>() > 100)
      throw bad("logit_bias", fmt::format("token {}: expected a bias in [-100, 100], got {}", key, it->dump()));
    out.emplace_back(static_cast<std::int32_t>(id), it->get<float>());
  }
  return out;
}

void check_keys(const json& body, const std::set<std::string>& specific) {
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!kCommonKeys.contains(it.key()) && !specific.contains(it.key()))
      throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", it.key()), it.key());
}

// Fields both endpoints share; max_tokens is resolved by the caller.
ApiRequest common(const json& body, const ApiContext& ctx, const std::set<std::string>& specific) {
  if (!body.is_object()) throw ApiError(400, fmt::format("the request body must be a JSON object, got {}", type_name(body)));
  check_keys(body, specific);
  check_model(body, ctx);
  if (const json* user = find(body, "user"); user && !user->is_string()) throw bad("user", "expected a string");

  ApiRequest r;
  engine::SamplingParams& p = r.params;
  p = ctx.defaults;
  if (auto v = number(body, "temperature")) p.temperature = *v;
  if (auto v = number(body, "top_p")) p.top_p = *v;
  if (auto v = integer(body, "top_k", -1, std::numeric_limits<std::int32_t>::max())) p.top_k = static_cast<int>(*v);
  if (auto v = number(body, "min_p")) p.min_p = *v;
  if (auto v = number(body, "presence_penalty")) p.presence_penalty = *v;
  if (auto v = number(body, "frequency_penalty")) p.frequency_penalty = *v;
  if (auto v = number(body, "repetition_penalty")) p.repetition_penalty = *v;
  if (auto v = integer(body, "seed", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()))
    p.seed = static_cast<std::uint64_t>(*v);
  if (auto v = boolean(body, "ignore_eos")) p.ignore_eos = *v;
  if (auto v = boolean(body, "include_stop_str_in_output")) p.include_stop_str_in_output = *v;
  p.stop = stop_strings(body);
  p.logit_bias = logit_bias(body, ctx.tokenizer->vocab_size());
  if (const json* ids = find(body, "stop_token_ids")) {
    if (!ids->is_array()) throw bad("stop_token_ids", "expected a list of token ids");
    for (const json& id : *ids) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= ctx.tokenizer->vocab_size())
        throw bad("stop_token_ids", fmt::format("expected token ids in [0, {})", ctx.tokenizer->vocab_size()));
      p.stop_token_ids.push_back(id.get<std::int32_t>());
    }
  }
  r.n = static_cast<int>(integer(body, "n", 1, 16).value_or(1));
  r.stream = boolean(body, "stream").value_or(false);
  if (const json* so = find(body, "stream_options")) {
    if (!so->is_object()) throw bad("stream_options", "expected an object");
    if (!r.stream) throw bad("stream_options", "only allowed when stream is true");
    for (auto it = so->begin(); it != so->end(); ++it)
      if (it.key() != "include_usage" && it.key() != "continuous_usage_stats")
        throw bad("stream_options", fmt::format("unknown option {}", it.key()));
    r.include_usage = boolean(*so, "include_usage").value_or(false);
  }
  return r;
}

// max_tokens in [1, max_model_len] (0 allowed with echo); unset = the rest of the context.
void resolve_max_tokens(ApiRequest& r, const json& body, const char* key, const ApiContext& ctx, int fallback) {
  auto v = integer(body, key, r.echo ? 0 : 1, std::numeric_limits<std::int32_t>::max());
  const int longest_prompt = [&] {
    std::size_t m = 0;
    for (auto& p : r.prompts) m = std::max(m, p.size());
    return static_cast<int>(m);
  }();
  if (longest_prompt >= ctx.max_model_len)
    throw ApiError(
        400,
        fmt::format(
            "This model's maximum context length is {} tokens. However, your prompt has {} tokens, which leaves no room for the output.",
            ctx.max_model_len, longest_prompt),
        r.chat ? "messages" : "prompt", "invalid_request_error", "context_length_exceeded");
  const int room = ctx.max_model_len - longest_prompt;
  if (v && *v > room)
    throw ApiError(
        400,
        fmt::format(
            "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the prompt, {} for the output).",
            ctx.max_model_len, longest_prompt + *v, longest_prompt, *v),
        key, "invalid_request_error", "context_length_exceeded");
  r.params.max_tokens = v ? static_cast<int>(*v) : (fallback > 0 ? std::min(fallback, room) : room);
}

void validate_sampling(ApiRequest& r) {
  engine::SamplingParams p = r.params;
  p.max_tokens = std::max(p.max_tokens, 1);
  try {
    p.validate();
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    throw ApiError(400, msg, msg.substr(0, msg.find(':')));
  }
}

void check_prompt_bytes(std::size_t bytes, const ApiContext& ctx, const char* param) {
  // No tokenizer run is needed to know that a prompt this long cannot fit.
  if (bytes > static_cast<std::size_t>(ctx.max_model_len) * ctx.max_token_bytes)
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens; the prompt of {} bytes is longer than that.",
                               ctx.max_model_len, bytes),
                   param, "invalid_request_error", "context_length_exceeded");
}

std::string message_content(const json& m, std::size_t i) {
  const json* c = find(m, "content");
  if (!c) return "";
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) throw bad("messages", fmt::format("messages[{}].content: expected a string or a list of text parts", i));
  std::string text;
  for (const json& part : *c) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") || !part["text"].is_string())
      throw bad("messages", fmt::format("messages[{}].content: only parts {{\"type\": \"text\", \"text\": ...}} are supported", i));
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

std::string render_chat_prompt(const json& body, const ApiContext& ctx, bool add_generation_prompt) {
  const json* msgs = find(body, "messages");
  if (!msgs) throw bad("messages", "required");
  if (!msgs->is_array() || msgs->empty()) throw bad("messages", "expected a non-empty list of messages");
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  std::vector<tok::ChatMessage> chat;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    if (!m.is_object()) throw bad("messages", fmt::format("messages[{}]: expected an object", i));
    const json* role = find(m, "role");
    if (!role || !role->is_string() || !kRoles.contains(role->get<std::string>()))
      throw bad("messages", fmt::format("messages[{}].role: expected one of system, developer, user, assistant, tool", i));
    chat.push_back({role->get<std::string>() == "developer" ? "system" : role->get<std::string>(), message_content(m, i)});
    bytes += chat.back().content.size();
  }
  check_prompt_bytes(bytes, ctx, "messages");
  tok::ChatTemplateOptions o;
  o.bos_token = ctx.chat_template.bos_token;
  o.eos_token = ctx.chat_template.eos_token;
  o.add_generation_prompt = add_generation_prompt;
  try {
    // No template: ChatML, as render_chat would fall back to, without its warning on every request.
    return ctx.chat_template.tmpl.empty() ? tok::render_chatml(chat, add_generation_prompt)
                                          : tok::render_chat(ctx.chat_template.tmpl, chat, o);
  } catch (const tok::ChatTemplateError& e) {
    throw bad("messages", fmt::format("the chat template refused them: {}", e.message()));
  }
}

void check_model(const json& body, const ApiContext& ctx) {
  // Without "model" the request is for the served model, as vLLM and llama-server take it.
  if (const json* model = find(body, "model")) {
    if (!model->is_string()) throw bad("model", fmt::format("expected a string, got {}", type_name(*model)));
    if (model->get<std::string>() != ctx.model_name)
      throw ApiError(404, fmt::format("The model `{}` does not exist; this server serves `{}`", model->get<std::string>(), ctx.model_name),
                     "model", "invalid_request_error", "model_not_found");
  }
}

ApiRequest parse_chat_request(const json& body, const ApiContext& ctx) {
  ApiRequest r = common(body, ctx, kChatKeys);
  r.chat = true;
  const std::string text = render_chat_prompt(body, ctx, true);
  r.prompt_texts.push_back(text);
  r.prompts.push_back(ctx.tokenizer->encode(text, false, true));
  r.logprobs = boolean(body, "logprobs").value_or(false);
  if (auto k = integer(body, "top_logprobs", 0, engine::kMaxLogprobs)) {
    if (!r.logprobs) throw bad("top_logprobs", "requires logprobs: true");
    r.params.logprobs = static_cast<int>(*k);
  }
  const char* key = find(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  resolve_max_tokens(r, body, key, ctx, ctx.default_max_tokens);
  validate_sampling(r);
  return r;
}

ApiRequest parse_completion_request(const json& body, const ApiContext& ctx) {
  ApiRequest r = common(body, ctx, kCompletionKeys);
  const json* prompt = find(body, "prompt");
  if (!prompt) throw bad("prompt", "required");
  auto add_text = [&](const json& s) {
    check_prompt_bytes(s.get_ref<const std::string&>().size(), ctx, "prompt");
    r.prompt_texts.push_back(s.get<std::string>());
    r.prompts.push_back(tok::encode_prompt(*ctx.tokenizer, r.prompt_texts.back()));
  };
  auto add_ids = [&](const json& ids) {
    std::vector<std::int32_t> out;
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= ctx.tokenizer->vocab_size())
        throw bad("prompt", fmt::format("token ids must be integers in [0, {})", ctx.tokenizer->vocab_size()));
      out.push_back(id.get<std::int32_t>());
    }
    r.prompt_texts.push_back(ctx.tokenizer->decode(out, false));
    r.prompts.push_back(std::move(out));
  };
  if (prompt->is_string()) {
    add_text(*prompt);
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    add_ids(*prompt);
  } else if (prompt->is_array() && !prompt->empty() && prompt->size() <= 64) {
    for (const json& p : *prompt) {
      if (p.is_string())
        add_text(p);
      else if (p.is_array() && !p.empty())
        add_ids(p);
      else
        throw bad("prompt", "expected a string, a list of strings, a list of token ids or a list of such lists");
    }
  } else {
    throw bad("prompt", "expected a string, a list of strings, a list of token ids or a list of such lists (1 to 64 prompts)");
  }
  for (const auto& p : r.prompts)
    if (p.empty()) throw bad("prompt", "it has no tokens");
  r.echo = boolean(body, "echo").value_or(false);
  if (auto k = integer(body, "logprobs", 0, engine::kMaxLogprobs)) {
    r.logprobs = true;
    r.params.logprobs = static_cast<int>(*k);
  }
  if (r.echo && r.stream) throw bad("echo", "not supported together with stream");
  resolve_max_tokens(r, body, "max_tokens", ctx, ctx.default_max_tokens > 0 ? ctx.default_max_tokens : 16);
  if (r.params.max_tokens == 0 && !r.logprobs) throw bad("max_tokens", "0 is only allowed with echo and logprobs");
  validate_sampling(r);
  return r;
}

}  // namespace mo::serve
