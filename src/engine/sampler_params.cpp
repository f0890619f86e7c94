#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "mo/core/error.h"
#include "mo/engine/sampler.h"

namespace mo::engine {
namespace {

// Written so that NaN fails every check.
void check_range(std::string_view name, double v, double lo, bool lo_open, double hi, const char* range) {
  const bool ok = (lo_open ? v > lo : v >= lo) && v <= hi;
  if (!ok) throw UsageError(fmt::format("{}: expected a number in {}, got {}", name, range, v));
}

}  // namespace

// Ranges from vLLM's SamplingParams._verify_args (vllm/sampling_params.py) and the OpenAI API.
void SamplingParams::validate() const {
  check_range("temperature", temperature, 0.0, false, 2.0, "[0, 2]");
  check_range("top_p", top_p, 0.0, true, 1.0, "(0, 1]");
  if (top_k < -1) throw UsageError(fmt::format("top_k: expected -1 or 0 (all tokens) or an integer >= 1, got {}", top_k));
  check_range("min_p", min_p, 0.0, false, 1.0, "[0, 1]");
  // Bounded so that logits divided or multiplied by it stay finite (1e-45 made every logit inf).
  check_range("repetition_penalty", repetition_penalty, 0.001, false, 1000.0, "[0.001, 1000]");
  check_range("presence_penalty", presence_penalty, -2.0, false, 2.0, "[-2, 2]");
  check_range("frequency_penalty", frequency_penalty, -2.0, false, 2.0, "[-2, 2]");
  if (max_tokens < 1) throw UsageError(fmt::format("max_tokens: expected an integer >= 1, got {}", max_tokens));
  if (logprobs < 0 || logprobs > kMaxLogprobs)
    throw UsageError(fmt::format("logprobs: expected an integer in [0, {}], got {}", kMaxLogprobs, logprobs));
  for (std::int32_t id : stop_token_ids)
    if (id < 0) throw UsageError(fmt::format("stop_token_ids: expected token ids >= 0, got {}", id));
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) throw UsageError(fmt::format("logit_bias: expected token ids >= 0, got {}", id));
    check_range("logit_bias", bias, -100.0, false, 100.0, "[-100, 100]");
  }
  for (std::size_t i = 0; i < stop.size(); ++i)
    if (stop[i].empty()) throw UsageError(fmt::format("stop: expected non-empty strings, got an empty string at index {}", i));
}

}  // namespace mo::engine
