#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mo/core/error.h"
#include "mo/engine/kv_cache.h"
#include "mo/eval/perplexity.h"
#include "mo/eval/tasks.h"

namespace mo::eval {
namespace {

struct Request {
  std::vector<std::int32_t> tokens;  // context + continuation
  int ctx_len = 0;                   // tokens of the context (BOS included)
};

struct Scored {
  double loglik = 0;
  bool greedy = true;  // every continuation token is the argmax
};

// Python's str.isspace() for one code point.
bool python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Bytes of trailing whitespace, as len(s) - len(s.rstrip()) counts it in characters.
std::size_t trailing_space_bytes(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;  // back to the lead byte
    const auto* b = reinterpret_cast<const unsigned char*>(s.data() + start);
    const std::size_t n = end - start;
    char32_t c = b[0];
    if (n == 2) c = ((b[0] & 0x1Fu) << 6) | (b[1] & 0x3Fu);
    if (n == 3) c = ((b[0] & 0x0Fu) << 12) | ((b[1] & 0x3Fu) << 6) | (b[2] & 0x3Fu);
    if (n > 3 || !python_space(c)) break;
    end = start;
  }
  return s.size() - end;
}

// lm-evaluation-harness's split (TemplateLM._encode_pair): trailing whitespace of the context moves to the
// continuation; context+continuation are encoded together and cut at the context's length, so a token that
// merges across the boundary counts as continuation. Special-token text in a chat-formatted context
// ("<|im_start|>") is its token, as Hugging Face tokenizers (lm-eval's) and serve's /tokenize make it.
Request make_request(const tok::Tokenizer& tok, const std::string& context, const std::string& cont, const std::string& where) {
  const auto& sp = tok.special();
  const std::string ctx = context.substr(0, context.size() - trailing_space_bytes(context));
  std::vector<std::int32_t> whole = tok.encode(context + cont, false, true);
  const std::size_t n_ctx = tok.encode(ctx, false, true).size();
  Request r;
  if (sp.add_bos && sp.bos) r.tokens.push_back(*sp.bos);
  r.tokens.insert(r.tokens.end(), whole.begin(), whole.end());
  r.ctx_len = static_cast<int>(std::min(n_ctx + (r.tokens.size() - whole.size()), r.tokens.size()));
  if (r.ctx_len == 0) throw UsageError(fmt::format("{}: empty context and the model has no BOS token to start from", where));
  if (r.ctx_len == static_cast<int>(r.tokens.size())) throw UsageError(fmt::format("{}: the continuation tokenizes to nothing", where));
  return r;
}

std::int64_t argmax(const float* x, std::int64_t n) { return std::max_element(x, x + n) - x; }

// All requests of one item in two forward steps: their common prefix once, then each remainder as a fork.
std::vector<Scored> score_item(engine::Engine& engine, const std::vector<Request>& reqs, engine::KvStorage& kv) {
  using namespace mo::engine;
  int prefix = reqs[0].ctx_len;
  for (const auto& r : reqs) {
    prefix = std::min(prefix, r.ctx_len);
    int k = 0;
    while (k < prefix && r.tokens[static_cast<std::size_t>(k)] == reqs[0].tokens[static_cast<std::size_t>(k)]) ++k;
    prefix = k;
  }
  const std::int64_t n_vocab = engine.hparams().vocab_size;
  KvCacheManager mgr(kv.num_blocks(), kv.layout().block_size);
  std::vector<float> prefix_logits;  // [vocab]: predicts the token at position `prefix`
  if (prefix > 0) {
    mgr.add_sequence(0);
    auto app = mgr.append(0, prefix);
    if (!app) throw Error("tasks: the KV cache cannot hold the shared prefix");
    SeqChunk chunk{std::span(reqs[0].tokens.data(), static_cast<std::size_t>(prefix)), app->start_pos, app->slots, mgr.block_table(0),
                   false};
    prefix_logits = engine.forward(std::span<const SeqChunk>(&chunk, 1), kv);
  }
  std::vector<AppendResult> apps;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const auto id = static_cast<std::int64_t>(i + 1);
    if (prefix > 0)
      mgr.fork(0, id);
    else
      mgr.add_sequence(id);
    auto app = mgr.append(id, static_cast<int>(reqs[i].tokens.size()) - prefix);
    if (!app) throw Error("tasks: the KV cache cannot hold one item");
    for (const auto& c : app->copies) kv.copy_block(c.src_block, c.dst_block);
    apps.push_back(std::move(*app));
  }
  std::vector<std::vector<int>> tables;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    auto t = mgr.block_table(static_cast<std::int64_t>(i + 1));
    tables.emplace_back(t.begin(), t.end());
  }
  std::vector<SeqChunk> chunks;
  for (std::size_t i = 0; i < reqs.size(); ++i)
    chunks.push_back(
        {std::span(reqs[i].tokens).subspan(static_cast<std::size_t>(prefix)), apps[i].start_pos, apps[i].slots, tables[i], true});
  const std::vector<float> logits = engine.forward(chunks, kv);

  std::vector<Scored> out(reqs.size());
  std::int64_t row0 = 0;  // first row of request i in `logits`
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const auto& r = reqs[i];
    const int len = static_cast<int>(r.tokens.size());
    for (int p = r.ctx_len; p < len; ++p) {
      // The logits predicting position p come from position p - 1.
      const float* row = p == prefix ? prefix_logits.data() : logits.data() + (row0 + (p - 1 - prefix)) * n_vocab;
      const std::int32_t tok = r.tokens[static_cast<std::size_t>(p)];
      out[i].loglik -= token_nll(row, n_vocab, tok);
      out[i].greedy = out[i].greedy && argmax(row, n_vocab) == tok;
    }
    row0 += len - prefix;
  }
  return out;
}

int best_of(const std::vector<double>& scores) {
  return static_cast<int>(std::max_element(scores.begin(), scores.end()) - scores.begin());  // first of equals, as numpy.argmax
}

// Python's len(str): UTF-8 lead bytes, continuation bytes (10xxxxxx) not counted.
std::size_t code_points(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

}  // namespace

ChoicePicks pick_choice(const std::vector<double>& logliks, const std::vector<std::string>& choices) {
  std::vector<double> by_chars, by_bytes;
  for (std::size_t c = 0; c < logliks.size(); ++c) {
    // An empty choice divides by zero in numpy too (-inf or nan); keep the order defined instead.
    by_chars.push_back(logliks[c] / static_cast<double>(std::max<std::size_t>(1, code_points(choices[c]))));
    by_bytes.push_back(logliks[c] / static_cast<double>(std::max<std::size_t>(1, choices[c].size())));
  }
  return {best_of(logliks), best_of(by_chars), best_of(by_bytes)};
}

TaskResult run_task(engine::Engine& engine, const tok::Tokenizer& tok, const TaskFile& task, std::int64_t limit,
                    const std::function<void(std::int64_t, std::int64_t)>& on_item) {
  const std::int64_t total = static_cast<std::int64_t>(task.items.size());
  const std::int64_t n = limit > 0 ? std::min(limit, total) : total;
  std::vector<std::vector<Request>> all(static_cast<std::size_t>(n));
  std::int64_t max_tokens = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const TaskItem& item = task.items[static_cast<std::size_t>(i)];
    std::int64_t tokens = 0;
    for (std::size_t c = 0; c < item.contexts.size(); ++c) {
      all[static_cast<std::size_t>(i)].push_back(
          make_request(tok, item.contexts[c], item.continuations[c], fmt::format("{} item {}", task.path, i + 1)));
      tokens += static_cast<std::int64_t>(all[static_cast<std::size_t>(i)].back().tokens.size());
    }
    max_tokens = std::max(max_tokens, tokens);
  }
  // One storage for every item: enough blocks for the largest item's sequences, each with a spare
  // block for its copy-on-write and its partial tail.
  const auto layout = engine.kv_layout(16, engine::KvDtype::f16);
  std::int64_t max_choices = 0;
  for (const auto& item : task.items) max_choices = std::max<std::int64_t>(max_choices, static_cast<std::int64_t>(item.contexts.size()));
  engine::KvStorage kv(layout, static_cast<int>(max_tokens / layout.block_size + 2 * (max_choices + 1)), engine.kv_device());

  TaskResult r;
  r.name = task.name;
  r.path = task.path;
  r.items = n;
  r.total_items = total;
  r.completion = !task.items.empty() && task.items.front().completion;
  double correct = 0, correct_norm = 0, correct_bytes = 0, loglik = 0, chance = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const TaskItem& item = task.items[static_cast<std::size_t>(i)];
    const auto scored = score_item(engine, all[static_cast<std::size_t>(i)], kv);
    auto& logged = r.item_logliks.emplace_back();
    for (const Scored& sc : scored) logged.push_back(sc.loglik);
    if (item.completion) {
      correct += scored[0].greedy;
      loglik += scored[0].loglik;
    } else {
      std::vector<double> ll;
      for (const Scored& s : scored) ll.push_back(s.loglik);
      const ChoicePicks pick = pick_choice(ll, item.choices);
      correct += pick.acc == item.gold;
      correct_norm += pick.acc_norm == item.gold;
      correct_bytes += pick.acc_bytes == item.gold;
      chance += 1.0 / static_cast<double>(scored.size());
    }
    if (on_item) on_item(i + 1, n);
  }
  const double dn = static_cast<double>(n);
  r.acc = correct / dn;
  r.acc_stderr = binomial_stderr(r.acc, n);
  if (r.completion) {
    r.mean_loglik = loglik / dn;
  } else {
    r.acc_norm = correct_norm / dn;
    r.acc_norm_stderr = binomial_stderr(*r.acc_norm, n);
    r.acc_bytes = correct_bytes / dn;
    r.acc_bytes_stderr = binomial_stderr(*r.acc_bytes, n);
    r.chance = chance / dn;
  }
  return r;
}

}  // namespace mo::eval
