#pragma once
// Perplexity computed the way llama.cpp's `llama-perplexity` does (tools/perplexity/perplexity.cpp,
// perplexity() with ppl_stride 0), so our numbers can be compared with its printed ones:
//  - the whole text is tokenized once, with BOS first when the model adds one;
//  - it is cut into n_tokens / n_ctx windows of n_ctx tokens (the tail is dropped), each run from an
//    empty KV cache with its first token replaced by BOS (when the model adds BOS);
//  - only the second half of a window is scored: the logits at positions n_ctx/2 .. n_ctx-2 predict
//    the tokens at n_ctx/2+1 .. n_ctx-1, so a window scores n_ctx - 1 - n_ctx/2 tokens;
//  - NLL is summed in double and ppl = exp(mean NLL).
// llama.cpp's -f reads the file as is (CRLF kept) and drops one trailing '\n'; callers pass the text.
// The `strided` method is Hugging Face's ("Perplexity of fixed-length models"): windows of n_ctx tokens
// every `stride` tokens, no BOS substitution, each token after the first scored exactly once (with
// stride == n_ctx each window's first token has no context and is not scored, as in Hugging Face's loop).
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "mo/engine/engine.h"
#include "mo/engine/kv_layout.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::eval {

struct PerplexityResult {
  double ppl = 0.0;                      // exp(nll_mean)
  double nll_mean = 0.0;                 // mean negative log-likelihood per scored token (nats)
  std::int64_t tokens_scored = 0;        // windows * (n_ctx - 1 - n_ctx / 2)
  int windows = 0;                       // windows run
  std::vector<double> ppl_after_window;  // running ppl after each window (llama.cpp's "[i]ppl," line)
};

// Throws UsageError when n_ctx < 4 or the text has fewer than 2 * n_ctx tokens (as llama.cpp refuses).
// max_windows: 0 runs all windows. kv_dtype: f16 is llama.cpp's default KV cache type.
PerplexityResult perplexity_llama_cpp(engine::Engine& engine, const tok::Tokenizer& tokenizer, std::string_view text, int n_ctx,
                                      int max_windows, engine::KvDtype kv_dtype = engine::KvDtype::f16);

enum class PplMethod { llama_cpp, strided };
const char* ppl_method_name(PplMethod m);  // "llama.cpp" | "strided"

// One forward pass of a method: tokens[start, start + len) from an empty cache; logits row j predicts
// tokens[start + j + 1], and rows first_row .. len - 2 are scored.
struct PplWindow {
  std::int64_t start = 0;
  int len = 0;
  int first_row = 0;
  bool bos_first = false;  // the first token is replaced by BOS (llama.cpp method)
};

// The windows of `method` over n_tokens tokens (llama.cpp: refuses fewer than 2 * n_ctx tokens with a
// UsageError; strided: stride in 1..n_ctx). max_windows 0 = all.
std::vector<PplWindow> plan_ppl_windows(PplMethod method, std::int64_t n_tokens, int n_ctx, int stride, int max_windows, bool add_bos);

// Runs one window and returns its logits [len, vocab]. `kv` must hold n_ctx tokens of this engine's layout.
std::vector<float> run_ppl_window(engine::Engine& engine, std::span<const std::int32_t> tokens, const PplWindow& w, std::int32_t bos,
                                  engine::KvStorage& kv);

// -log p(tok) from one row of logits, with llama.cpp's arithmetic (float max, double sum of expf).
double token_nll(const float* logits, std::int64_t n_vocab, std::int32_t tok);

}  // namespace mo::eval
