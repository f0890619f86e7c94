#include "mo/eval/latency.h"

#include <fmt/format.h>

#include <algorithm>

#include "mo/core/error.h"
#include "mo/engine/generator.h"

namespace mo::eval {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

LatencyResult measure_latency(engine::Engine& engine, const tok::Tokenizer& tok, std::span<const std::int32_t> source,
                              const LatencySettings& s) {
  if (s.prompt_tokens < 1 || s.output_tokens < 2 || s.runs < 1 || s.warmup < 0)
    throw UsageError(fmt::format("latency: prompt_tokens >= 1, output_tokens >= 2, runs >= 1 and warmup >= 0 needed (got {}, {}, {}, {})",
                                 s.prompt_tokens, s.output_tokens, s.runs, s.warmup));
  if (source.empty()) throw UsageError("latency: no prompt text");
  const std::int64_t ctx = engine.hparams().context_length > 0 ? engine.hparams().context_length : 4096;
  if (s.prompt_tokens + s.output_tokens >= ctx)
    throw UsageError(fmt::format("latency: prompt_tokens + output_tokens ({}) must be below the model's context of {}",
                                 s.prompt_tokens + s.output_tokens, ctx));
  std::vector<std::int32_t> prompt;
  while (static_cast<int>(prompt.size()) < s.prompt_tokens)
    prompt.insert(prompt.end(), source.begin(), source.begin() + std::min<std::ptrdiff_t>(source.size(), s.prompt_tokens - prompt.size()));

  engine::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = s.output_tokens;
  p.ignore_eos = true;  // a fixed output length, whatever the model wants to say
  LatencyResult r;
  r.prompt_tokens = s.prompt_tokens;
  r.output_tokens = s.output_tokens;
  r.runs = s.runs;
  std::vector<double> prefill;
  for (int i = 0; i < s.warmup + s.runs; ++i) {
    const auto st = engine::generate(engine, tok, prompt, p, {}, [](std::string_view) {});
    if (i < s.warmup) continue;
    r.ttft_ms_runs.push_back(st.ttft_ms);
    r.decode_tokens_per_s_runs.push_back(st.decode_tokens_per_s);
    prefill.push_back(st.prefill_tokens_per_s);
  }
  r.ttft_ms = median(r.ttft_ms_runs);
  r.decode_tokens_per_s = median(r.decode_tokens_per_s_runs);
  r.prefill_tokens_per_s = median(prefill);
  return r;
}

}  // namespace mo::eval
