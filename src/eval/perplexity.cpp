#include "mo/eval/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mo/core/error.h"
#include "mo/engine/kv_cache.h"
#include "mo/engine/kv_storage.h"

namespace mo::eval {
namespace {

// -log p(tok) from one row of logits, with llama.cpp's arithmetic: float max, double sum of expf.
double token_nll(const float* logits, std::int64_t n_vocab, std::int32_t tok) {
  float max_logit = logits[0];
  for (std::int64_t i = 1; i < n_vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum_exp = 0.0;
  for (std::int64_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  return -(static_cast<double>(logits[tok] - max_logit) - std::log(sum_exp));
}

}  // namespace

PerplexityResult perplexity_llama_cpp(engine::Engine& engine, const tok::Tokenizer& tokenizer, std::string_view text, int n_ctx,
                                      int max_windows, engine::KvDtype kv_dtype) {
  using namespace mo::engine;
  if (n_ctx < 4) throw UsageError(fmt::format("perplexity: n_ctx must be at least 4, got {}", n_ctx));
  if (max_windows < 0) throw UsageError(fmt::format("perplexity: max_windows must be >= 0, got {}", max_windows));

  const auto& special = tokenizer.special();
  const bool add_bos = special.add_bos && special.bos.has_value();
  // common_tokenize(ctx, text, add_special = true, parse_special = false)
  const std::vector<std::int32_t> tokens = tokenizer.encode(text, true, false);
  const auto n_tokens = static_cast<std::int64_t>(tokens.size());
  if (n_tokens < 2 * static_cast<std::int64_t>(n_ctx))
    throw UsageError(fmt::format("perplexity: the text tokenizes to only {} tokens; a context of {} needs at least {}", n_tokens,
                                 n_ctx, 2 * n_ctx));

  const int n_max = static_cast<int>(n_tokens / n_ctx);
  const int n_windows = max_windows == 0 ? n_max : std::min(max_windows, n_max);
  const int first = n_ctx / 2;
  const std::int64_t n_vocab = engine.hparams().vocab_size;

  const KvLayout layout = engine.kv_layout(16, kv_dtype);
  const int n_blocks = (n_ctx + layout.block_size - 1) / layout.block_size;
  KvStorage kv(layout, n_blocks);  // every window overwrites the slots it reads, so one storage serves all

  PerplexityResult r;
  double nll = 0.0;
  std::vector<std::int32_t> window(n_ctx);
  for (int w = 0; w < n_windows; ++w) {
    const std::int64_t start = static_cast<std::int64_t>(w) * n_ctx;
    std::copy_n(tokens.begin() + start, n_ctx, window.begin());
    if (add_bos) window[0] = *special.bos;

    KvCacheManager mgr(n_blocks, layout.block_size);
    mgr.add_sequence(0);
    auto app = mgr.append(0, n_ctx);
    if (!app) throw Error("perplexity: the KV cache cannot hold one window");
    SeqChunk chunk{window, app->start_pos, app->slots, mgr.block_table(0), true};
    const std::vector<float> logits = engine.forward(std::span<const SeqChunk>(&chunk, 1), kv);

    // The logits at position j predict the original token at j + 1.
    for (int j = first; j < n_ctx - 1; ++j) nll += token_nll(logits.data() + static_cast<std::int64_t>(j) * n_vocab, n_vocab, tokens[start + j + 1]);
    r.tokens_scored += n_ctx - 1 - first;
    r.ppl_after_window.push_back(std::exp(nll / static_cast<double>(r.tokens_scored)));
  }
  r.windows = n_windows;
  r.nll_mean = nll / static_cast<double>(r.tokens_scored);
  r.ppl = std::exp(r.nll_mean);
  return r;
}

}  // namespace mo::eval
