// A request body for /v1/chat/completions and /v1/completions: JSON, then OpenAI's parameter rules.
#include <nlohmann/json.hpp>

#include "fuzz_tokenizer.h"
#include "mo/serve/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const mo::serve::ApiContext ctx = [] {
    mo::serve::ApiContext c;
    c.tokenizer = &mo::fuzz::stories_tokenizer();
    c.model_name = "stories260K";
    c.max_model_len = 512;
    c.max_token_bytes = 16;
    return c;
  }();
  const nlohmann::json body = nlohmann::json::parse(data, data + size, nullptr, false);
  if (body.is_discarded()) return 0;  // the server answers 400 before these run
  for (bool chat : {true, false}) {
    try {
      chat ? mo::serve::parse_chat_request(body, ctx) : mo::serve::parse_completion_request(body, ctx);
    } catch (const mo::serve::ApiError& e) {
      if (mo::fuzz::verbose()) std::fprintf(stderr, "refused (%d): %s\n", e.status, e.what());
      if (e.status < 400 || e.status > 599) std::abort();
    }
  }
  return 0;
}
