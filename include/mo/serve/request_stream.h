#pragma once
// What one API request asks the serving loop for, and the channel its results come back on: the loop
// pushes events, the HTTP handler pops them (and may cancel, e.g. when the client has gone).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mo/engine/sampler.h"

namespace mo::serve {

// One choice of a request: a prompt sampled with its own parameters (seed already per choice).
struct SeqSpec {
  int choice = 0;                    // index in the response's choices
  std::vector<std::int32_t> prompt;  // token ids, not empty
  engine::SamplingParams params;     // validated; max_tokens 0 only with prompt_logprobs (echo)
  int max_total_tokens = 0;          // prompt + output stop here (max_model_len)
  bool prompt_logprobs = false;      // logprobs of every prompt token (completions echo + logprobs)
  std::string request_id;            // the response's id ("cmpl-..."), for the log
};

struct TokenLogprob {
  std::int32_t id = 0;
  float logprob = 0;
  std::vector<std::pair<std::int32_t, float>> top;  // params.logprobs alternatives, most likely first
};

struct ChoiceEvent {
  int choice = 0;
  std::string text;                                 // text completed by this event (whole UTF-8 characters)
  std::vector<TokenLogprob> tokens;                 // output tokens sampled since the last event
  std::vector<std::optional<TokenLogprob>> prompt;  // echo: each prompt token (the first has no logprob), once
  std::string finish_reason;                        // "stop" | "length" on a choice's last event, else empty
  int prompt_tokens = 0;                            // on the last event
  int completion_tokens = 0;                        // on the last event
  std::string error;                                // the request failed (model error, timeout, shutdown)
  int error_status = 500;                           // HTTP status for `error`: 503 when the server is shutting down
};

class RequestStream {
 public:
  explicit RequestStream(int num_choices) : open_choices_(num_choices) {}

  void push(ChoiceEvent e) {
    {
      std::lock_guard lock(mu_);
      if (!e.finish_reason.empty() || !e.error.empty()) --open_choices_;
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }
  // The next event, or nothing after `wait`.
  std::optional<ChoiceEvent> pop(std::chrono::milliseconds wait) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, wait, [&] { return !events_.empty(); })) return std::nullopt;
    ChoiceEvent e = std::move(events_.front());
    events_.pop_front();
    return e;
  }
  // Every choice has sent its last event (they may still be queued here).
  bool done() const {
    std::lock_guard lock(mu_);
    return open_choices_ <= 0;
  }
  // The client is gone or gave up: the loop frees the request's sequences at its next step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ChoiceEvent> events_;
  int open_choices_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace mo::serve
