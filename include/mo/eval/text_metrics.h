#pragma once
// Perplexity of several models on the same windows of one text, and for each model after the first the
// KL divergence of its next-token distribution from the first's (the base): per window the base logits
// are computed once and reused for every candidate, so nothing vocab-sized is kept across windows.
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "mo/engine/engine.h"
#include "mo/eval/perplexity.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::eval {

struct PplSettings {
  PplMethod method = PplMethod::llama_cpp;
  int n_ctx = 512;
  int stride = 256;     // strided method only
  int max_windows = 0;  // 0 = all
  engine::KvDtype kv_dtype = engine::KvDtype::f16;
};

struct KlResult {
  double mean = 0;  // mean over scored tokens of KL(base || model), nats
  double p99 = 0;   // 99th percentile of the per-token KL
  double max = 0;
  double top1_agreement = 0;  // fraction of scored tokens where both argmax agree
  std::int64_t tokens = 0;
};

struct TextMetrics {
  std::int64_t text_tokens = 0;
  int windows_available = 0;          // windows the whole text gives (more than run when max_windows cut it)
  std::vector<PerplexityResult> ppl;  // one per model, in the order given
  std::vector<KlResult> kl;           // one per model; kl[0] is the base against itself (all zero)
};

// KL(p || q) in nats of the softmaxes of two logit rows, and whether their argmax agree.
double kl_divergence_row(const float* base_logits, const float* logits, std::int64_t n_vocab, bool* top1_same);
// The q-quantile (0..1) of `values` by linear interpolation (sorts a copy); 0 for an empty input.
double quantile(std::vector<double> values, double q);

// All models must share the tokenizer's vocabulary (checked: vocab sizes equal). `on_window(done, total)`
// is called before the first window (done 0) and after each window. Throws UsageError for too short a text or bad settings.
TextMetrics evaluate_text(std::span<engine::Engine* const> models, const tok::Tokenizer& tokenizer, std::string_view text,
                          const PplSettings& s, const std::function<void(int, int)>& on_window = {});

}  // namespace mo::eval
