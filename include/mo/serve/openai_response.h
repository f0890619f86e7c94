#pragma once
// OpenAI response bodies: whole answers (chat.completion, text_completion) and SSE chunks
// (chat.completion.chunk, text_completion chunks), built from the events of the serving loop.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "mo/serve/openai_request.h"
#include "mo/serve/request_stream.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::serve {

// Response bodies keep their keys in the order written, as OpenAI's do: a completion's top_logprobs object
// lists the most likely token first, and clients that take its first key get that token.
using ResponseJson = nlohmann::ordered_json;

// Everything one choice produced, gathered from its events.
struct ChoiceResult {
  std::string text;
  std::vector<TokenLogprob> tokens;
  std::vector<std::optional<TokenLogprob>> prompt;  // echo with logprobs
  std::string finish_reason;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  void add(const ChoiceEvent& e);
};

struct ResponseIds {
  std::string id;            // "chatcmpl-..." / "cmpl-..."
  std::int64_t created = 0;  // Unix seconds
  std::string model;
};

ResponseJson usage_json(int prompt_tokens, int completion_tokens);
// Usage of a whole request: each prompt counted once (not once per choice), every choice's output.
ResponseJson request_usage(const ApiRequest& req, const std::vector<ChoiceResult>& results);

ResponseJson chat_response(const ResponseIds& ids, const ApiRequest& req, const std::vector<ChoiceResult>& results,
                           const tok::Tokenizer& tok);
ResponseJson completion_response(const ResponseIds& ids, const ApiRequest& req, const std::vector<ChoiceResult>& results,
                                 const tok::Tokenizer& tok);

// One SSE chunk per event; nullopt when the event carries nothing to send.
std::optional<ResponseJson> chat_chunk(const ResponseIds& ids, const ApiRequest& req, const ChoiceEvent& e, const tok::Tokenizer& tok);
ResponseJson chat_role_chunk(const ResponseIds& ids, const ApiRequest& req, int choice);
std::optional<ResponseJson> completion_chunk(const ResponseIds& ids, const ApiRequest& req, const ChoiceEvent& e,
                                             const tok::Tokenizer& tok);
// The last chunk with include_usage: no choices, the usage.
ResponseJson usage_chunk(const ResponseIds& ids, bool chat, const ResponseJson& usage);

// JSON text that never throws on invalid UTF-8 (a token may be half a character): bad bytes become U+FFFD.
std::string dump(const ResponseJson& j);
std::string dump(const nlohmann::json& j);

}  // namespace mo::serve
