#include <fmt/format.h>

#include <initializer_list>

#include "mo/core/error.h"
#include "mo/engine/sampler.h"

namespace mo::engine {
namespace {

// Per-thread counters, so a sequence keeps nothing vocab-sized between steps. All zero between calls.
struct PenaltyScratch {
  std::vector<std::int32_t> counts;  // [vocab] occurrences in the output
  std::vector<std::uint8_t> seen;    // [vocab] already given the repetition penalty
};
thread_local PenaltyScratch t_scratch;

void check_ids(std::span<const std::int32_t> ids, std::size_t vocab) {
  for (std::int32_t t : ids)
    if (t < 0 || static_cast<std::size_t>(t) >= vocab)
      throw Error(fmt::format("sampler: token id {} is outside the vocabulary [0, {})", t, vocab));
}

}  // namespace

// vLLM v1's sampler: logit_bias first (LogitBiasLogitsProcessor), then
// vllm/model_executor/layers/utils.py apply_penalties: the repetition penalty first
// (apply_repetition_penalties_torch in vllm/_custom_ops.py), then logits -= frequency * count, then
// logits -= presence * (count > 0), in float32.
void apply_penalties(std::span<float> logits, const SamplingParams& params, std::span<const std::int32_t> prompt_tokens,
                     std::span<const std::int32_t> output_tokens) {
  const bool repetition = params.repetition_penalty != 1.0;
  const bool additive = params.frequency_penalty != 0.0 || params.presence_penalty != 0.0;
  if (!repetition && !additive && params.logit_bias.empty()) return;
  const std::size_t vocab = logits.size();
  // Checked before anything is touched, so an error leaves the logits and the counters as they were.
  for (const auto& [id, bias] : params.logit_bias)
    if (id < 0 || static_cast<std::size_t>(id) >= vocab)
      throw Error(fmt::format("sampler: logit_bias token id {} is outside the vocabulary [0, {})", id, vocab));
  if (repetition || additive) check_ids(output_tokens, vocab);
  if (repetition) check_ids(prompt_tokens, vocab);
  for (const auto& [id, bias] : params.logit_bias) logits[static_cast<std::size_t>(id)] += bias;
  PenaltyScratch& s = t_scratch;

  if (repetition) {
    if (s.seen.size() < vocab) s.seen.resize(vocab, 0);
    const float r = static_cast<float>(params.repetition_penalty);
    for (const auto ids : {prompt_tokens, output_tokens})
      for (std::int32_t t : ids) {
        const auto i = static_cast<std::size_t>(t);
        if (s.seen[i]) continue;
        s.seen[i] = 1;
        logits[i] = logits[i] > 0 ? logits[i] / r : logits[i] * r;
      }
    for (const auto ids : {prompt_tokens, output_tokens})
      for (std::int32_t t : ids) s.seen[static_cast<std::size_t>(t)] = 0;
  }

  if (additive) {
    if (s.counts.size() < vocab) s.counts.resize(vocab, 0);
    const float f = static_cast<float>(params.frequency_penalty);
    const float pr = static_cast<float>(params.presence_penalty);
    for (std::int32_t t : output_tokens) ++s.counts[static_cast<std::size_t>(t)];
    for (std::int32_t t : output_tokens) {
      const auto i = static_cast<std::size_t>(t);
      if (s.counts[i] == 0) continue;  // applied at its first occurrence
      logits[i] -= f * static_cast<float>(s.counts[i]);
      logits[i] -= pr;
      s.counts[i] = 0;
    }
  }
}

}  // namespace mo::engine
