// Raw bytes as one connection's input to the OpenAI-compatible server, processed in memory
// (HttpServer::answer): httplib's request parser, our framing checks, the API key, routing, request
// validation, the serving loop (over a fake model that ends every answer with EOS) and the response
// writers, streaming included. Every answer must be an HTTP response, or nothing for unreadable input.
#include <cstring>

#include "fuzz_tokenizer.h"
#include "mo/serve/http_server.h"
#include "mo/serve/serving_loop.h"

namespace {

// Built once and kept (reachable, so leak checks stay quiet).
mo::serve::HttpServer& server() {
  static mo::serve::HttpServer* http = [] {
    const auto& tok = mo::fuzz::stories_tokenizer();
    const int vocab = tok.vocab_size();
    const std::int32_t eos = tok.special().eos.value_or(0);
    mo::serve::ServingOptions so;
    so.scheduler = {.num_blocks = 256,
                    .block_size = 16,
                    .max_num_seqs = 8,
                    .max_num_batched_tokens = 512,
                    .enable_chunked_prefill = true,
                    .enable_prefix_caching = true};
    so.vocab_size = vocab;
    so.max_queue_len = 64;
    so.request_timeout_s = 20;
    so.eos_ids = {eos};
    auto forward = [vocab, eos](std::span<const mo::engine::SeqChunk> chunks) {
      std::vector<float> out;
      for (const auto& c : chunks) {
        const std::size_t rows = c.all_logits ? c.tokens.size() : 1;
        for (std::size_t r = 0; r < rows; ++r) {
          std::vector<float> row(static_cast<std::size_t>(vocab), 0.0f);
          row[static_cast<std::size_t>(eos)] = 5.0f;
          out.insert(out.end(), row.begin(), row.end());
        }
      }
      return out;
    };
    auto* loop = new mo::serve::ServingLoop(forward, tok, so);
    mo::serve::ApiContext ctx;
    ctx.tokenizer = &tok;
    ctx.model_name = "stories260K";
    ctx.max_model_len = 512;
    ctx.max_token_bytes = 16;
    return new mo::serve::HttpServer(*loop, ctx, {.api_key = "k", .max_body_bytes = 1u << 20});
  }();
  return *http;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string answer = server().answer(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!answer.empty() && answer.rfind("HTTP/1.1 ", 0) != 0) {
    std::fprintf(stderr, "fuzz_http_server: the answer is not an HTTP response: %.80s\n", answer.c_str());
    std::abort();
  }
  if (mo::fuzz::verbose()) std::fprintf(stderr, "answer: %s\n", answer.substr(0, answer.find('\r')).c_str());
  return 0;
}
