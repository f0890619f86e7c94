#pragma once
// One prompt in, streamed text out: prefill, then decode with the sampler until a stop token, a stop
// string, max_tokens or the context length, with the timings `generate` reports.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mo/engine/engine.h"
#include "mo/engine/sampler.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::engine {

struct GenerationStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;
  double ttft_ms = 0;  // prompt in -> first token out
  double prefill_tokens_per_s = 0;
  double decode_tokens_per_s = 0;  // tokens after the first / their time
  std::size_t peak_rss_bytes = 0;
  std::string finish_reason;  // "stop" | "length"
  std::vector<std::int32_t> output_ids;
};

struct GenerationOptions {
  int block_size = 16;
  KvDtype kv_dtype = KvDtype::f16;
  std::uint64_t seed = 0;  // for sequences whose SamplingParams have no seed
};

// `eos_ids` stop generation unless params.ignore_eos. `on_text` receives whole UTF-8 characters.
GenerationStats generate(Engine& engine, const tok::Tokenizer& tok, std::span<const std::int32_t> prompt, const SamplingParams& params,
                         std::span<const std::int32_t> eos_ids, const std::function<void(std::string_view)>& on_text,
                         const GenerationOptions& opt = {});

}  // namespace mo::engine
