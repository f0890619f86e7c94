#include "mo/engine/generator.h"

#include <fmt/format.h>

#include <chrono>

#include "mo/core/error.h"
#include "mo/core/memory.h"
#include "mo/engine/kv_cache.h"
#include "mo/engine/stop_checker.h"

namespace mo::engine {

GenerationStats generate(Engine& engine, const tok::Tokenizer& tok, std::span<const std::int32_t> prompt, const SamplingParams& params,
                         std::span<const std::int32_t> eos_ids, const std::function<void(std::string_view)>& on_text,
                         const GenerationOptions& opt) {
  using clock = std::chrono::steady_clock;
  params.validate();
  if (prompt.empty()) throw UsageError("prompt: it has no tokens");
  const std::int64_t ctx_limit = engine.hparams().context_length > 0 ? engine.hparams().context_length : 4096;
  if (static_cast<std::int64_t>(prompt.size()) >= ctx_limit)
    throw UsageError(fmt::format("prompt: {} tokens do not leave room to generate in the model's context of {}", prompt.size(), ctx_limit));
  const std::int64_t max_len = std::min<std::int64_t>(ctx_limit, static_cast<std::int64_t>(prompt.size()) + params.max_tokens);

  KvLayout layout = engine.kv_layout(opt.block_size, opt.kv_dtype);
  const int blocks = static_cast<int>((max_len + layout.block_size - 1) / layout.block_size);
  KvCacheManager mgr(blocks, layout.block_size);
  KvStorage kv(layout, blocks, engine.kv_device());
  mgr.add_sequence(0);
  Sampler sampler(params, opt.seed);
  StopChecker stops(params.stop, params.include_stop_str_in_output);
  tok::IncrementalDecoder decoder(tok);

  GenerationStats st;
  st.prompt_tokens = static_cast<int>(prompt.size());
  std::vector<std::int32_t> step(prompt.begin(), prompt.end());
  const auto start = clock::now();
  auto first_token_at = start;
  bool stop_string = false;
  for (;;) {
    auto app = mgr.append(0, static_cast<int>(step.size()));
    if (!app) throw Error("generate: the KV cache ran out of blocks");  // sized for max_len, so a bug
    SeqChunk c{step, app->start_pos, app->slots, mgr.block_table(0), false};
    std::vector<float> logits = engine.forward(std::span<const SeqChunk>(&c, 1), kv);
    SampledToken t = sampler.sample(logits, prompt, st.output_ids);
    if (st.output_ids.empty()) first_token_at = clock::now();
    if (is_stop_token(t.id, params, eos_ids)) {
      st.finish_reason = "stop";
      break;
    }
    st.output_ids.push_back(t.id);
    auto r = stops.push(decoder.push(t.id));
    if (!r.emit.empty()) on_text(r.emit);
    if (r.stopped) {
      st.finish_reason = "stop";
      stop_string = true;
      break;
    }
    if (static_cast<int>(st.output_ids.size()) >= params.max_tokens || mgr.num_tokens(0) + 1 >= max_len) {
      st.finish_reason = "length";
      break;
    }
    step = {t.id};
  }
  if (!stop_string) {
    // Bytes held back (an unfinished character, a possible stop-string start) are released now.
    auto r = stops.push(decoder.flush());
    std::string rest = r.emit + (r.stopped ? "" : stops.flush());
    if (!rest.empty()) on_text(rest);
  }
  const auto end = clock::now();
  const double prefill_s = std::chrono::duration<double>(first_token_at - start).count();
  const double decode_s = std::chrono::duration<double>(end - first_token_at).count();
  st.generated_tokens = static_cast<int>(st.output_ids.size());
  st.ttft_ms = prefill_s * 1000;
  st.prefill_tokens_per_s = prefill_s > 0 ? st.prompt_tokens / prefill_s : 0;
  st.decode_tokens_per_s = st.generated_tokens > 1 && decode_s > 0 ? (st.generated_tokens - 1) / decode_s : 0;
  st.peak_rss_bytes = peak_rss_bytes();
  return st;
}

}  // namespace mo::engine
