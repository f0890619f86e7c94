#include "mo/eval/text_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mo/core/error.h"

namespace mo::eval {
namespace {

// log-softmax of one row in double: log p_i = x_i - max - log(sum exp(x - max)).
void log_softmax(const float* x, std::int64_t n, std::vector<double>& out) {
  out.resize(static_cast<std::size_t>(n));
  float mx = x[0];
  for (std::int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - mx);
  const double lse = std::log(sum) + mx;
  for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = static_cast<double>(x[i]) - lse;
}

std::int64_t argmax(const float* x, std::int64_t n) { return std::max_element(x, x + n) - x; }

}  // namespace

double kl_divergence_row(const float* base_logits, const float* logits, std::int64_t n_vocab, bool* top1_same) {
  thread_local std::vector<double> lp, lq;
  log_softmax(base_logits, n_vocab, lp);
  log_softmax(logits, n_vocab, lq);
  double kl = 0;
  for (std::int64_t i = 0; i < n_vocab; ++i) {
    const double p = std::exp(lp[static_cast<std::size_t>(i)]);
    kl += p * (lp[static_cast<std::size_t>(i)] - lq[static_cast<std::size_t>(i)]);
  }
  if (top1_same) *top1_same = argmax(base_logits, n_vocab) == argmax(logits, n_vocab);
  return std::max(kl, 0.0);  // rounding can leave -1e-17 for identical rows
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

TextMetrics evaluate_text(std::span<engine::Engine* const> models, const tok::Tokenizer& tokenizer, std::string_view text,
                          const PplSettings& s, const std::function<void(int, int)>& on_window) {
  if (models.empty()) throw Error("evaluate_text: no model");
  const std::int64_t n_vocab = models[0]->hparams().vocab_size;
  for (auto* m : models)
    if (m->hparams().vocab_size != n_vocab)
      throw UsageError(fmt::format("the models have different vocabularies ({} vs {} tokens); KL divergence needs the same one", n_vocab,
                                   m->hparams().vocab_size));
  const auto& special = tokenizer.special();
  const bool add_bos = special.add_bos && special.bos.has_value();
  const std::vector<std::int32_t> tokens = tokenizer.encode(text, true, false);
  const auto windows = plan_ppl_windows(s.method, static_cast<std::int64_t>(tokens.size()), s.n_ctx, s.stride, s.max_windows, add_bos);

  std::vector<engine::KvStorage> kv;
  for (auto* m : models) {
    const auto layout = m->kv_layout(16, s.kv_dtype);
    kv.emplace_back(layout, (s.n_ctx + layout.block_size - 1) / layout.block_size, m->kv_device());
  }
  TextMetrics r;
  r.text_tokens = static_cast<std::int64_t>(tokens.size());
  r.windows_available = static_cast<int>(plan_ppl_windows(s.method, r.text_tokens, s.n_ctx, s.stride, 0, add_bos).size());
  r.ppl.resize(models.size());
  r.kl.resize(models.size());
  std::vector<double> nll(models.size(), 0.0), top1(models.size(), 0.0);
  std::vector<std::vector<double>> per_token_kl(models.size());
  std::int64_t scored = 0;
  if (on_window) on_window(0, static_cast<int>(windows.size()));
  for (std::size_t w = 0; w < windows.size(); ++w) {
    const PplWindow& win = windows[w];
    const std::vector<float> base = run_ppl_window(*models[0], tokens, win, add_bos ? *special.bos : 0, kv[0]);
    for (std::size_t m = 0; m < models.size(); ++m) {
      const std::vector<float> own =
          m == 0 ? std::vector<float>{} : run_ppl_window(*models[m], tokens, win, add_bos ? *special.bos : 0, kv[m]);
      const std::vector<float>& logits = m == 0 ? base : own;
      for (int j = win.first_row; j < win.len - 1; ++j) {
        const float* row = logits.data() + static_cast<std::int64_t>(j) * n_vocab;
        nll[m] += token_nll(row, n_vocab, tokens[win.start + j + 1]);
        if (m == 0) continue;
        bool same = false;
        per_token_kl[m].push_back(kl_divergence_row(base.data() + static_cast<std::int64_t>(j) * n_vocab, row, n_vocab, &same));
        top1[m] += same;
      }
    }
    scored += win.len - 1 - win.first_row;
    for (std::size_t m = 0; m < models.size(); ++m) r.ppl[m].ppl_after_window.push_back(std::exp(nll[m] / static_cast<double>(scored)));
    if (on_window) on_window(static_cast<int>(w + 1), static_cast<int>(windows.size()));
  }
  for (std::size_t m = 0; m < models.size(); ++m) {
    auto& p = r.ppl[m];
    p.windows = static_cast<int>(windows.size());
    p.tokens_scored = scored;
    p.nll_mean = nll[m] / static_cast<double>(scored);
    p.ppl = std::exp(p.nll_mean);
    auto& k = r.kl[m];
    k.tokens = scored;
    if (m == 0) {
      k.top1_agreement = 1.0;  // the base against itself, by definition
      continue;
    }
    double sum = 0;
    for (double v : per_token_kl[m]) sum += v;
    k.mean = sum / static_cast<double>(scored);
    k.max = per_token_kl[m].empty() ? 0 : *std::max_element(per_token_kl[m].begin(), per_token_kl[m].end());
    k.p99 = quantile(std::move(per_token_kl[m]), 0.99);
    k.top1_agreement = top1[m] / static_cast<double>(scored);
  }
  return r;
}

}  // namespace mo::eval
