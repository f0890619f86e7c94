#include "mo/serve/tokenize_api.h"

#include <fmt/format.h>

#include <set>

namespace mo::serve {

using nlohmann::json;

namespace {

ApiError bad(const std::string& param, const std::string& message) { return ApiError(400, fmt::format("{}: {}", param, message), param); }

void check_keys(const json& body, const std::set<std::string>& allowed) {
  if (!body.is_object()) throw ApiError(400, fmt::format("the request body must be a JSON object, got {}", body.type_name()));
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!allowed.contains(it.key())) throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", it.key()), it.key());
}

bool flag(const json& body, const char* key, bool fallback) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw bad(key, fmt::format("expected true or false, got {}", it->type_name()));
  return it->get<bool>();
}

json token_text(const tok::Tokenizer& tok, std::optional<std::int32_t> id) { return id ? json(tok.token_text(*id)) : json(nullptr); }

}  // namespace

json tokenize_response(const json& body, const ApiContext& ctx) {
  check_keys(body, {"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt", "return_token_strs"});
  check_model(body, ctx);
  const tok::Tokenizer& tok = *ctx.tokenizer;
  const bool chat = body.contains("messages");
  if (chat == body.contains("prompt")) throw bad("prompt", "expected either prompt (a string) or messages");
  std::vector<std::int32_t> ids;
  if (chat) {
    const std::string text = render_chat_prompt(body, ctx, flag(body, "add_generation_prompt", true));
    // As vLLM: a rendered chat already holds its special tokens, so none are added unless asked for.
    ids = flag(body, "add_special_tokens", false) ? tok::encode_prompt(tok, text) : tok.encode(text, false, true);
  } else {
    const json& prompt = body["prompt"];
    if (!prompt.is_string()) throw bad("prompt", fmt::format("expected a string, got {}", prompt.type_name()));
    const std::string& text = prompt.get_ref<const std::string&>();
    // As for completions: a text this long cannot fit, and tokenizing it would only tie up a thread.
    if (text.size() > static_cast<std::size_t>(ctx.max_model_len) * ctx.max_token_bytes)
      throw ApiError(400,
                     fmt::format("This model's maximum context length is {} tokens; the prompt of {} bytes is longer than that.",
                                 ctx.max_model_len, text.size()),
                     "prompt", "invalid_request_error", "context_length_exceeded");
    ids = flag(body, "add_special_tokens", true) ? tok::encode_prompt(tok, text) : tok.encode(text, false, true);
  }
  json strs = nullptr;
  if (flag(body, "return_token_strs", false)) {
    strs = json::array();
    for (std::int32_t id : ids) strs.push_back(tok.token_text(id));
  }
  return {{"count", ids.size()}, {"max_model_len", ctx.max_model_len}, {"tokens", ids}, {"token_strs", strs}};
}

json detokenize_response(const json& body, const ApiContext& ctx) {
  check_keys(body, {"model", "tokens"});
  check_model(body, ctx);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) throw bad("tokens", "expected a list of token ids");
  std::vector<std::int32_t> ids;
  for (const json& id : *it) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= ctx.tokenizer->vocab_size())
      throw bad("tokens", fmt::format("token ids must be integers in [0, {})", ctx.tokenizer->vocab_size()));
    ids.push_back(id.get<std::int32_t>());
  }
  // As vLLM (HF decode): special tokens are part of the text.
  return {{"prompt", ctx.tokenizer->decode(ids, false)}};
}

json tokenizer_info(const ApiContext& ctx) {
  const tok::Tokenizer& tok = *ctx.tokenizer;
  const auto& sp = tok.special();
  return {{"tokenizer_class", tok.kind() == "spm" ? "LlamaTokenizerFast" : "PreTrainedTokenizerFast"},
          {"bos_token", token_text(tok, sp.bos)},
          {"eos_token", token_text(tok, sp.eos)},
          {"pad_token", token_text(tok, sp.pad)},
          {"unk_token", token_text(tok, sp.unk)},
          {"add_bos_token", sp.add_bos},
          {"add_eos_token", sp.add_eos},
          {"chat_template", ctx.chat_template.tmpl.empty() ? json(nullptr) : json(ctx.chat_template.tmpl)},
          {"model_max_length", ctx.max_model_len},
          {"vocab_size", tok.vocab_size()}};
}

}  // namespace mo::serve
