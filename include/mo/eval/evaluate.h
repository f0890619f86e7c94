#pragma once
// One evaluation of a model, alone or against a base model, with the same engine and data for both:
// perplexity (and KL divergence vs the base) on a text, multiple-choice task accuracy, generation latency
// and the process's peak memory. `eval` and `quantize` both run this and hand the result to report/.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mo/core/device.h"

#include "mo/eval/latency.h"
#include "mo/eval/tasks.h"
#include "mo/eval/text_metrics.h"

namespace mo::eval {

struct EvalSettings {
  std::string text = "wikitext2";  // perplexity text: a file or a built-in name; empty = skip perplexity and KL
  PplSettings ppl;
  std::vector<std::string> tasks;  // JSONL files or built-in names
  std::int64_t limit = 0;          // items per task; 0 = all
  bool latency = true;
  LatencySettings latency_settings;
  Device device = Device::cpu;  // where the models run (cuda: the GPU engine)
};

struct ModelInfo {
  std::string path, name;        // name: the file or directory name
  std::string format;            // "gguf" | "safetensors"
  std::string weights;           // what the weights are stored as, e.g. "int4 (awq) 210 tensors, f16 62"
  std::uint64_t disk_bytes = 0;  // files of the model on disk (weights, config, tokenizer)
};

struct ModelEval {
  ModelInfo info;
  std::optional<PerplexityResult> ppl;
  std::optional<KlResult> kl;  // candidate only, when a base is given and perplexity runs
  std::vector<TaskResult> tasks;
  std::optional<LatencyResult> latency;
  std::string device;                   // "cpu", or the GPU's description
  std::uint64_t peak_device_bytes = 0;  // GPU runs: the most device memory this model's engine held (weights, KV, scratch)
};

struct EvalResult {
  EvalSettings settings;
  std::optional<ModelEval> base;
  ModelEval model;
  std::string text_path;  // resolved perplexity text
  std::int64_t text_tokens = 0;
  int ppl_windows_available = 0;     // windows in the whole text; more than run when ppl.max_windows cut it
  std::uint64_t peak_rss_bytes = 0;  // the whole evaluation process, both models loaded
  double seconds = 0;
  int threads = 0;
};

// True when ppl.max_windows left part of the text unscored (the report says so).
inline bool ppl_limited(const EvalResult& r) { return r.model.ppl && r.model.ppl->windows < r.ppl_windows_available; }

// True when `limit` left items of some task unscored.
inline bool tasks_limited(const EvalResult& r) {
  for (const auto& t : r.model.tasks)
    if (t.items < t.total_items) return true;
  return false;
}

// base_path empty: evaluate model_path alone. Throws UsageError for bad inputs (naming the file or key).
EvalResult evaluate(const std::string& model_path, const std::string& base_path, const EvalSettings& s);

ModelInfo describe_model(const std::string& path);

}  // namespace mo::eval
