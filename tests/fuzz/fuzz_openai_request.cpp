// A request body for /v1/chat/completions, /v1/completions, /tokenize and /detokenize: JSON, then the
// parameter rules.
#include <nlohmann/json.hpp>

#include "fuzz_tokenizer.h"
#include "mo/serve/openai_request.h"
#include "mo/serve/tokenize_api.h"

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
  for (int route = 0; route < 4; ++route) {
    try {
      if (route == 0) mo::serve::parse_chat_request(body, ctx);
      if (route == 1) mo::serve::parse_completion_request(body, ctx);
      if (route == 2) mo::serve::tokenize_response(body, ctx);
      if (route == 3) mo::serve::detokenize_response(body, ctx);
    } catch (const mo::serve::ApiError& e) {
      if (mo::fuzz::verbose()) std::fprintf(stderr, "refused (%d): %s\n", e.status, e.what());
      if (e.status < 400 || e.status > 599) std::abort();
    }
  }
  return 0;
}
