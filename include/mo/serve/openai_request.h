#pragma once
// OpenAI request bodies (/v1/chat/completions, /v1/completions) checked and turned into token ids and
// sampling parameters. Anything wrong is an ApiError that names the parameter, as OpenAI's API does.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "mo/engine/sampler.h"
#include "mo/tokenizer/chat_template.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int http_status, const std::string& message, std::string param_name = {}, std::string error_type = "invalid_request_error",
           std::string error_code = {})
      : std::runtime_error(message),
        status(http_status),
        param(std::move(param_name)),
        type(std::move(error_type)),
        code(std::move(error_code)) {}
  int status;
  std::string param, type, code;
  int retry_after_s = 0;  // > 0: sent as Retry-After (429 queue full), which OpenAI and vLLM clients honour
};

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_body(const ApiError& e);

// What the server knows when it reads a request.
struct ApiContext {
  const tok::Tokenizer* tokenizer = nullptr;
  tok::ModelChatTemplate chat_template;
  std::string model_name;           // the only name "model" may carry; a request without "model" means it
  int max_model_len = 0;            // prompt + output tokens per sequence
  std::size_t max_token_bytes = 1;  // longest token in bytes: prompts over max_model_len * this are refused unread
  engine::SamplingParams defaults;  // serve.yaml defaults for parameters a request leaves out
  int default_max_tokens = 0;       // 0 = up to max_model_len (chat), 16 (completions, as OpenAI)
};

struct ApiRequest {
  bool chat = false;
  std::vector<std::vector<std::int32_t>> prompts;  // one per prompt (completions may send several)
  std::vector<std::string> prompt_texts;           // their text, for echo
  engine::SamplingParams params;                   // validated; max_tokens 0 only with echo
  int n = 1;                                       // choices per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // chat: logprobs; completions: logprobs given
  bool echo = false;           // completions: the prompt is part of the text
};

// Throw ApiError(400) naming the first bad parameter.
// "model", when given, must be the served model's name (404 model_not_found otherwise).
void check_model(const nlohmann::json& body, const ApiContext& ctx);
// body["messages"] checked and rendered with the model's chat template (ChatML without one).
std::string render_chat_prompt(const nlohmann::json& body, const ApiContext& ctx, bool add_generation_prompt);
ApiRequest parse_chat_request(const nlohmann::json& body, const ApiContext& ctx);
ApiRequest parse_completion_request(const nlohmann::json& body, const ApiContext& ctx);

}  // namespace mo::serve
