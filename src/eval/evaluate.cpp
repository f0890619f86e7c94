#include "mo/eval/evaluate.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <map>

#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/core/memory.h"
#include "mo/core/progress.h"
#include "mo/core/thread_pool.h"
#include "mo/eval/eval_data.h"
#include "mo/model/model_check.h"
#include "mo/model/model_files.h"

namespace fs = std::filesystem;

namespace mo::eval {
namespace {

struct LoadedModel {
  model::ModelFiles files;
  std::unique_ptr<tok::Tokenizer> tok;
  std::unique_ptr<engine::Engine> engine;
};

LoadedModel load(const std::string& path, Device device) {
  LoadedModel m{model::ModelFiles::open(path), nullptr, nullptr};
  m.tok = model::check_model(m.files, model::TokenizerUse::required);
  m.engine = std::make_unique<engine::Engine>(engine::bind_weights(m.files), default_pool(), device);
  return m;
}

// A progress line that prints at most ~40 times per step, so CI logs stay short.
struct Ticker {
  Progress p;
  std::int64_t step;
  Ticker(std::string what, std::int64_t total, std::string unit)
      : p(std::move(what), total, std::move(unit)), step(std::max<std::int64_t>(1, total / 40)) {}
  void operator()(std::int64_t done, std::int64_t total) {
    if (done % step == 0 || done == total) p.update(done);
    if (done == total) p.finish();
  }
};

std::string label(const std::string& name, bool with_base, bool is_base) { return with_base ? (is_base ? "base" : "model") : name; }

}  // namespace

ModelInfo describe_model(const std::string& path) {
  ModelInfo info;
  info.path = path;
  info.name = fs::path(path).filename().string();
  if (info.name.empty()) info.name = fs::path(path).parent_path().filename().string();
  if (fs::is_directory(path)) {
    for (const auto& e : fs::directory_iterator(path)) {
      const std::string f = e.path().filename().string();
      if (e.is_regular_file() && f != "report.md" && f != "report.json" && f != "decisions.jsonl") info.disk_bytes += e.file_size();
    }
  } else if (fs::is_regular_file(path)) {
    info.disk_bytes = fs::file_size(path);
  }
  const auto files = model::ModelFiles::open(path);
  info.format = files.format();
  const auto& q = files.quantization_config();
  if (q.is_object() && q.contains("quant_method")) {
    info.weights = q["quant_method"].get<std::string>();
    if (q.contains("bits")) info.weights += fmt::format(" {}-bit", q["bits"].dump());
    if (q.contains("group_size")) info.weights += fmt::format(" g{}", q["group_size"].dump());
  } else {
    std::map<std::string, int> by_type;
    for (const auto& t : files.tensors()) by_type[t.dtype]++;
    std::string s;
    for (const auto& [type, n] : by_type) s += fmt::format("{}{} x{}", s.empty() ? "" : ", ", type, n);
    info.weights = s;
  }
  return info;
}

EvalResult evaluate(const std::string& model_path, const std::string& base_path, const EvalSettings& s) {
  const auto t0 = std::chrono::steady_clock::now();
  EvalResult r;
  r.settings = s;
  r.threads = default_pool()->size();
  // Resolve every input before the slow work, so a typo fails at once.
  if (!s.text.empty()) r.text_path = resolve_text_path(s.text, "text");
  std::vector<TaskFile> tasks;
  for (const auto& t : s.tasks) tasks.push_back(load_task_file(resolve_task_path(t, "tasks")));
  const std::string text = s.text.empty() ? std::string() : read_eval_text(r.text_path);

  const bool with_base = !base_path.empty();
  std::optional<LoadedModel> base;
  if (with_base) {
    base.emplace(load(base_path, s.device));
    r.base.emplace();
    r.base->info = describe_model(base_path);
  }
  LoadedModel model = load(model_path, s.device);
  r.model.info = describe_model(model_path);
  const tok::Tokenizer& tok = with_base ? *base->tok : *model.tok;
  log::info("eval: {}{}", model_path, with_base ? " against " + base_path : "");

  std::vector<ModelEval*> evals;
  std::vector<engine::Engine*> engines;
  if (with_base) {
    evals.push_back(&*r.base);
    engines.push_back(base->engine.get());
  }
  evals.push_back(&r.model);
  engines.push_back(model.engine.get());

  if (!text.empty()) {
    std::optional<Ticker> tick;  // made at the first window, when the window count is known
    const std::string what =
        fmt::format("eval: perplexity{} ({}, ctx {})", with_base ? " + KL" : "", ppl_method_name(s.ppl.method), s.ppl.n_ctx);
    const TextMetrics tm = evaluate_text(engines, tok, text, s.ppl, [&](int done, int total) {
      if (!tick) tick.emplace(what, total, "windows");
      (*tick)(done, total);
    });
    r.text_tokens = tm.text_tokens;
    r.ppl_windows_available = tm.windows_available;
    for (std::size_t i = 0; i < evals.size(); ++i) evals[i]->ppl = tm.ppl[i];
    if (with_base) r.model.kl = tm.kl[1];
  }
  for (const auto& task : tasks) {
    for (std::size_t i = 0; i < evals.size(); ++i) {
      const std::int64_t n = s.limit > 0 ? std::min<std::int64_t>(s.limit, static_cast<std::int64_t>(task.items.size()))
                                         : static_cast<std::int64_t>(task.items.size());
      Ticker tick(fmt::format("eval: {} ({})", task.name, label(evals[i]->info.name, with_base, i == 0 && with_base)), n, "items");
      evals[i]->tasks.push_back(run_task(*engines[i], tok, task, s.limit, [&](std::int64_t d, std::int64_t t) { tick(d, t); }));
    }
  }
  if (s.latency) {
    // The prompt: the evaluation text's tokens, or a fixed sentence when perplexity is off.
    const std::string src = text.empty() ? std::string("The quick brown fox jumps over the lazy dog. ") : text.substr(0, 16384);
    const std::vector<std::int32_t> ids = tok.encode(src, true, false);
    for (std::size_t i = 0; i < evals.size(); ++i) {
      Ticker tick(fmt::format("eval: latency ({})", label(evals[i]->info.name, with_base, i == 0 && with_base)), 1, "steps");
      evals[i]->latency = measure_latency(*engines[i], tok, ids, s.latency_settings);
      tick(1, 1);
    }
  }
  for (std::size_t i = 0; i < evals.size(); ++i) {
    const engine::Backend* b = engines[i]->kv_device();
    evals[i]->device = b ? b->describe() : "cpu";
    if (b) evals[i]->peak_device_bytes = b->peak_allocated_bytes();
  }
  r.peak_rss_bytes = peak_rss_bytes();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace mo::eval
