#pragma once
// When an output ends: stop token ids (is_stop_token) and stop strings (StopChecker).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mo/engine/sampler.h"

namespace mo::engine {

// True when `id` ends the output: it is one of params.stop_token_ids, or one of eos_ids (the model's EOS
// ids) and params.ignore_eos is false. As vLLM, stop_token_ids stop even with ignore_eos.
bool is_stop_token(std::int32_t id, const SamplingParams& params, std::span<const std::int32_t> eos_ids);

// Finds stop strings in streamed text, across token boundaries. Feed it the newly decoded text of each
// token (whole UTF-8 characters); it passes on only text that can no longer be the start of a stop string,
// holding back the longest tail that is a proper prefix of one. With include_stop_str_in_output it holds
// nothing back, since the stop string would be sent anyway.
class StopChecker {
 public:
  struct Result {
    std::string emit;      // text to send now (whole UTF-8 characters)
    bool stopped = false;  // a stop string matched: the output ends here
    std::string matched;   // the stop string that matched, when stopped
  };

  // Empty strings in `stops` are ignored (SamplingParams::validate rejects them).
  explicit StopChecker(std::vector<std::string> stops, bool include_stop_str_in_output = false);

  // On a match, emit ends where the stop string starts (or ends, with include_stop_str_in_output) and the
  // rest of the text is dropped. When several stops match, the one that ends first wins; among those
  // ending at the same byte, the first in the list. After a stop, push returns nothing new.
  Result push(std::string_view new_text);

  // The text held back, for when the output ends another way (EOS, stop token, max_tokens); "" after a stop.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  bool include_stop_;
  std::size_t max_stop_len_ = 0;
  std::string tail_;      // last (max_stop_len_ - 1) bytes seen, where a stop string may have started
  std::size_t held_ = 0;  // bytes at the end of tail_ not emitted yet
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace mo::engine
