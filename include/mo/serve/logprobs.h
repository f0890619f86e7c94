#pragma once
// Log-probabilities read off one row of logits, as the API reports them (raw log-softmax).
#include <cstdint>
#include <span>

#include "mo/serve/request_stream.h"

namespace mo::serve {

// logprob of `id` under log_softmax(row), and the `top_n` most likely tokens (highest first, ties -> lower id).
TokenLogprob token_logprob(std::span<const float> row /*[vocab]*/, std::int32_t id, int top_n);

}  // namespace mo::serve
