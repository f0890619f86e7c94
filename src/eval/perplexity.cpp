#include "mo/eval/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mo/core/error.h"
#include "mo/engine/kv_cache.h"
#include "mo/engine/kv_storage.h"

namespace mo::eval {

double token_nll(const float* logits, std::int64_t n_vocab, std::int32_t tok) {
  float max_logit = logits[0];
  for (std::int64_t i = 1; i < n_vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum_exp = 0.0;
  for (std::int64_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  return -(static_cast<double>(logits[tok] - max_logit) - std::log(sum_exp));
}

const char* ppl_method_name(PplMethod m) { return m == PplMethod::llama_cpp ? "llama.cpp" : "strided"; }

std::vector<PplWindow> plan_ppl_windows(PplMethod method, std::int64_t n_tokens, int n_ctx, int stride, int max_windows, bool add_bos) {
  if (n_ctx < 4) throw UsageError(fmt::format("perplexity: n_ctx must be at least 4, got {}", n_ctx));
  if (max_windows < 0) throw UsageError(fmt::format("perplexity: max_windows must be >= 0, got {}", max_windows));
  std::vector<PplWindow> out;
  if (method == PplMethod::llama_cpp) {
    if (n_tokens < 2 * static_cast<std::int64_t>(n_ctx))
      throw UsageError(
          fmt::format("perplexity: the text tokenizes to only {} tokens; a context of {} needs at least {}", n_tokens, n_ctx, 2 * n_ctx));
    const int n_max = static_cast<int>(n_tokens / n_ctx);
    const int n = max_windows == 0 ? n_max : std::min(max_windows, n_max);
    for (int w = 0; w < n; ++w) out.push_back({static_cast<std::int64_t>(w) * n_ctx, n_ctx, n_ctx / 2, add_bos});
    return out;
  }
  if (stride < 1 || stride > n_ctx)
    throw UsageError(fmt::format("perplexity: stride must be between 1 and ctx ({}), got {}", n_ctx, stride));
  if (n_tokens < 2) throw UsageError(fmt::format("perplexity: the text tokenizes to only {} tokens; at least 2 are needed", n_tokens));
  // Hugging Face's loop: the window [begin, end) scores the tokens after the previous window's end.
  std::int64_t prev_end = 0;
  for (std::int64_t begin = 0; begin < n_tokens; begin += stride) {
    const std::int64_t end = std::min(begin + n_ctx, n_tokens);
    const std::int64_t first_target = std::max(prev_end, begin + 1);
    out.push_back({begin, static_cast<int>(end - begin), static_cast<int>(first_target - begin - 1), false});
    prev_end = end;
    if (end == n_tokens || (max_windows > 0 && static_cast<int>(out.size()) == max_windows)) break;
  }
  return out;
}

std::vector<float> run_ppl_window(engine::Engine& engine, std::span<const std::int32_t> tokens, const PplWindow& w, std::int32_t bos,
                                  engine::KvStorage& kv) {
  using namespace mo::engine;
  std::vector<std::int32_t> window(tokens.begin() + w.start, tokens.begin() + w.start + w.len);
  if (w.bos_first) window[0] = bos;
  // Every window starts from an empty cache and overwrites the slots it reads, so one storage serves all.
  KvCacheManager mgr(kv.num_blocks(), kv.layout().block_size);
  mgr.add_sequence(0);
  auto app = mgr.append(0, w.len);
  if (!app) throw Error("perplexity: the KV cache cannot hold one window");
  SeqChunk chunk{window, app->start_pos, app->slots, mgr.block_table(0), true};
  return engine.forward(std::span<const SeqChunk>(&chunk, 1), kv);
}

PerplexityResult perplexity_llama_cpp(engine::Engine& engine, const tok::Tokenizer& tokenizer, std::string_view text, int n_ctx,
                                      int max_windows, engine::KvDtype kv_dtype) {
  using namespace mo::engine;
  if (n_ctx < 4) throw UsageError(fmt::format("perplexity: n_ctx must be at least 4, got {}", n_ctx));
  const auto& special = tokenizer.special();
  const bool add_bos = special.add_bos && special.bos.has_value();
  // common_tokenize(ctx, text, add_special = true, parse_special = false)
  const std::vector<std::int32_t> tokens = tokenizer.encode(text, true, false);
  const auto windows = plan_ppl_windows(PplMethod::llama_cpp, static_cast<std::int64_t>(tokens.size()), n_ctx, 0, max_windows, add_bos);
  const std::int64_t n_vocab = engine.hparams().vocab_size;

  const KvLayout layout = engine.kv_layout(16, kv_dtype);
  KvStorage kv(layout, (n_ctx + layout.block_size - 1) / layout.block_size, engine.kv_device());

  PerplexityResult r;
  double nll = 0.0;
  for (const PplWindow& w : windows) {
    const std::vector<float> logits = run_ppl_window(engine, tokens, w, add_bos ? *special.bos : 0, kv);
    for (int j = w.first_row; j < w.len - 1; ++j)
      nll += token_nll(logits.data() + static_cast<std::int64_t>(j) * n_vocab, n_vocab, tokens[w.start + j + 1]);
    r.tokens_scored += w.len - 1 - w.first_row;
    r.ppl_after_window.push_back(std::exp(nll / static_cast<double>(r.tokens_scored)));
  }
  r.windows = static_cast<int>(windows.size());
  r.nll_mean = nll / static_cast<double>(r.tokens_scored);
  r.ppl = std::exp(r.nll_mean);
  return r;
}

}  // namespace mo::eval
