#pragma once
// Next-token sampling, with vLLM v1's semantics (vllm/v1/sample/sampler.py). Per token:
//   1. raw logprobs: log_softmax of the model's logits, before anything below (vLLM's default
//      logprobs_mode "raw_logprobs");
//   2. logit_bias added to its tokens' logits; then penalties: repetition over prompt + output tokens, then
//      frequency and presence over output tokens;
//   3. temperature < 1e-5: argmax (ties -> lowest id), nothing below runs and no random number is drawn;
//   4. logits /= temperature; min-p on the probabilities after temperature; top-k; top-p;
//   5. one uniform draw from the tokens left, in proportion to their probabilities.
// Randomness: std::mt19937_64 seeded with the seed (its output sequence is fixed by the C++ standard);
// each random step takes one 64-bit output x and uses u = (x >> 11) * 2^-53 in [0, 1), then walks the
// kept tokens in ascending id order and returns the first whose cumulative probability exceeds u.
// No std:: distribution is involved, so a seed gives the same tokens with every standard library.
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mo::engine {

// Below this temperature sampling is greedy (vLLM's _SAMPLING_EPS).
inline constexpr double kGreedyTemperature = 1e-5;
// Most top-n alternatives per token: vLLM's default max_logprobs, and OpenAI's top_logprobs limit.
inline constexpr int kMaxLogprobs = 20;

// One request's sampling options; names and defaults as in vLLM's SamplingParams and the OpenAI API.
struct SamplingParams {
  double temperature = 1.0;                       // [0, 2]; below 1e-5 = greedy (top_k, top_p and min_p are then ignored)
  int top_k = 0;                                  // 0 or -1 = all tokens; else keep logits >= the k-th largest (ties kept)
  double top_p = 1.0;                             // (0, 1]; keep the most likely tokens until their mass reaches top_p
  double min_p = 0.0;                             // [0, 1]; drop tokens with probability < min_p * the highest probability
  double repetition_penalty = 1.0;                // > 0; tokens in prompt or output: positive logits / it, others * it
  double presence_penalty = 0.0;                  // [-2, 2]; subtracted once from each token that occurs in the output
  double frequency_penalty = 0.0;                 // [-2, 2]; subtracted once per occurrence in the output
  std::optional<std::uint64_t> seed = {};         // unset: the engine's default seed for the sequence
  int max_tokens = 16;                            // >= 1; output tokens at most (the engine stops there)
  std::vector<std::int32_t> stop_token_ids = {};  // ids >= 0 that end the output, besides EOS; see is_stop_token
  std::vector<std::string> stop = {};             // non-empty strings that end the output; see StopChecker
  bool ignore_eos = false;                        // keep generating past EOS (stop_token_ids still stop)
  int logprobs = 0;                               // [0, 20]: top-n alternatives returned per token, 0 = none
  bool include_stop_str_in_output = false;        // a matched stop string is part of the text (vLLM's option)
  // (token id, bias in [-100, 100]) added to the logit before penalties (OpenAI's logit_bias); -100 bans a
  // token, +100 all but forces it. Ids must lie in [0, vocab). The logprobs stay raw, unbiased (as vLLM's).
  std::vector<std::pair<std::int32_t, float>> logit_bias = {};

  bool greedy() const { return temperature < kGreedyTemperature; }
  // Throws mo::UsageError naming the first bad parameter and its allowed range, e.g.
  // "top_p: expected a number in (0, 1], got 1.5".
  void validate() const;
};

struct SampledToken {
  std::int32_t id = 0;
  float logprob = 0;  // raw log-softmax of `id` (before penalties and temperature)
  // params.logprobs most likely tokens by raw logprob, highest first, ties -> lower id; may include `id`.
  std::vector<std::pair<std::int32_t, float>> top_logprobs;
};

// Step 2 alone, in place; what Sampler applies before temperature. Token ids must lie in [0, vocab);
// they are read only when a bias or a penalty is set.
void apply_penalties(std::span<float> logits /*[vocab]*/, const SamplingParams& params, std::span<const std::int32_t> prompt_tokens,
                     std::span<const std::int32_t> output_tokens);

// Each sequence owns one, so its tokens depend only on its seed, its logits and its own history, never on
// what else is in the batch.
class Sampler {
 public:
  // Validates `params` (mo::UsageError). params.seed, when set, wins over default_seed.
  Sampler(const SamplingParams& params, std::uint64_t default_seed);

  // logits: [vocab], not modified. NaN logits count as -inf. Throws mo::Error when no logit is finite
  // (or one is +inf), or when a penalty is set and a token id is outside [0, vocab).
  SampledToken sample(std::span<const float> logits, std::span<const std::int32_t> prompt_tokens,
                      std::span<const std::int32_t> output_tokens);

  // The probabilities sample() draws from for these inputs: [vocab], 0 for dropped tokens; one-hot when
  // greedy. Draws nothing.
  std::vector<float> distribution(std::span<const float> logits, std::span<const std::int32_t> prompt_tokens,
                                  std::span<const std::int32_t> output_tokens) const;

  const SamplingParams& params() const { return params_; }

 private:
  double next_uniform();

  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace mo::engine
