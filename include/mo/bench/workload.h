#pragma once
// What the benchmark sends: prompts (synthetic of a token length, or from a dataset file), output
// lengths, and arrival times for open-loop runs.
//
// Synthetic prompts: bench talks HTTP only and cannot know the server's tokenizer, so a prompt is made of
// common English words: 8 random ones first (no two prompts share a prefix, so prefix caching cannot
// skip their prefill), then the fixed word list in order from a random place. Its word count is
// calibrated against the server itself: two probe requests (92 and 260 words, max_tokens 1) report
// usage.prompt_tokens; the slope over whole cycles of the list is tokens per word on that tokenizer and
// the intercept the template overhead. The lengths the server really saw are recorded per request
// from usage.prompt_tokens, so the results show the achieved input length, not the intended one.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "mo/bench/request.h"

namespace mo::bench {

struct LengthDist {
  std::string kind = "fixed";  // fixed | uniform | normal
  long long mean = 0;
  double spread = 0;                             // uniform: +-spread*mean; normal: sd = spread*mean
  long long sample(std::mt19937_64& rng) const;  // always >= 1
};

struct PromptCalibration {
  double tokens_per_word = 1.0;
  double overhead_tokens = 0;  // template / BOS tokens the server adds to every prompt
  bool measured = false;
  std::string note;  // how it was obtained, for the results file
  long long words_for(long long tokens) const;
};

// Probes the server as described above; on any failure returns the 1 token/word assumption with the reason.
PromptCalibration calibrate_prompts(const EndpointOptions& ep);

// `n_words` words: 8 random ones, then the word list in order from a random place.
std::string synthetic_text(long long n_words, std::mt19937_64& rng);

// Prompts from a JSONL file (one object a line: "prompt", "text", or ShareGPT "conversations" /
// "messages" whose first human/user turn is taken) or a JSON array of such objects. Throws UsageError
// naming the file and line on bad input.
std::vector<std::string> load_dataset_prompts(const std::string& path);

struct WorkloadSpec {
  LengthDist input, output;
  std::string dataset;  // empty: synthetic
  long long num_prompts = 0;
  std::uint64_t seed = 0;
};
std::vector<PromptSpec> make_prompts(const WorkloadSpec& w, const PromptCalibration& cal, std::uint64_t stream_id);

// Send offsets in seconds from the start of a level: "poisson" (exponential gaps) or "constant".
std::vector<double> arrival_times(long long n, double rate, const std::string& kind, std::uint64_t seed);

}  // namespace mo::bench
