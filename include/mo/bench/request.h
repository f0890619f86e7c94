#pragma once
// One benchmark request against an OpenAI-compatible endpoint and the accounting of its answer:
// TTFT at the first chunk with text, output tokens from the server's `usage` (one SSE chunk may carry
// several tokens), ITL per token, TPOT = (e2e - ttft) / (output_tokens - 1).
#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "mo/bench/http.h"
#include "mo/bench/metrics.h"

namespace mo::bench {

// A response body past this is a runaway server: the request fails instead of filling memory.
inline constexpr std::size_t kMaxResponseBytes = std::size_t{32} << 20;

using Clock = std::chrono::steady_clock;

struct EndpointOptions {
  Url url;
  std::string endpoint = "completions";  // completions | chat
  std::string model;                     // empty: the field is left out
  std::string api_key;
  bool stream = true;
  bool ignore_eos = true;
  double timeout_s = 600;
};

struct PromptSpec {
  std::string text;
  long long input_tokens = 0;  // intended length; reported when the server sends no usage
  long long max_tokens = 0;
};

// JSON body of the request (stream_options.include_usage asks for the usage chunk when streaming).
std::string request_body(const EndpointOptions& ep, const PromptSpec& p);

// Parses an SSE response as it arrives and turns it into a RequestSample.
class StreamAccounting {
 public:
  explicit StreamAccounting(Clock::time_point sent) : sent_(sent) {}
  void feed(std::string_view bytes, Clock::time_point t);
  // Completes `s` (already carrying start_s) from what was fed; `end` is when the response ended.
  void finish(RequestSample& s, Clock::time_point end, long long fallback_input_tokens);

 private:
  void on_event(const std::string& data, Clock::time_point t);
  struct Chunk {
    Clock::time_point t;
    std::size_t text_bytes;
    long long cumulative_tokens;  // from a per-chunk usage; -1 when absent
  };
  Clock::time_point sent_;
  std::string line_buf_, data_;
  std::size_t scanned_ = 0;  // bytes of line_buf_ known to hold no line end (a long line is scanned once)
  std::vector<Chunk> chunks_;
  long long prompt_tokens_ = -1, completion_tokens_ = -1;
  bool done_ = false, finish_reason_seen_ = false, any_event_ = false;
  std::string error_;
};

// Splits `n_tokens` over chunks in proportion to their text bytes (largest remainder), each chunk at
// least one token when there are enough. Exposed for tests.
std::vector<long long> apportion_tokens(const std::vector<std::size_t>& text_bytes, long long n_tokens);

// Sends one request and measures it; never throws for server-side problems (they become sample.error).
RequestSample run_request(const EndpointOptions& ep, const PromptSpec& p, Clock::time_point level_start, const std::atomic<bool>* cancel);

}  // namespace mo::bench
