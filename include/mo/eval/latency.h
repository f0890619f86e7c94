#pragma once
// Generation latency of one model: a fixed prompt of prompt_tokens tokens (taken from the evaluation
// text, so every model sees the same ids) and exactly output_tokens greedy tokens (EOS ignored), run
// `warmup` times unmeasured, then `runs` times; the medians are reported.
#include <cstdint>
#include <span>
#include <vector>

#include "mo/engine/engine.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::eval {

struct LatencySettings {
  int prompt_tokens = 128;
  int output_tokens = 64;
  int warmup = 1;
  int runs = 3;
};

struct LatencyResult {
  int prompt_tokens = 0, output_tokens = 0, runs = 0;
  double ttft_ms = 0;                                          // median: prompt in -> first token out (prefill + first sample)
  double prefill_tokens_per_s = 0;                             // median
  double decode_tokens_per_s = 0;                              // median, tokens after the first
  std::vector<double> ttft_ms_runs, decode_tokens_per_s_runs;  // every measured run, in order
};

double median(std::vector<double> v);

// `source` supplies the prompt ids (its first prompt_tokens; repeated when shorter). Throws UsageError
// for a prompt + output longer than the model's context or non-positive settings.
LatencyResult measure_latency(engine::Engine& engine, const tok::Tokenizer& tok, std::span<const std::int32_t> source,
                              const LatencySettings& s);

}  // namespace mo::eval
