#include "metric_rows.h"

#include <fmt/format.h>

#include <tuple>

namespace mo::report {
namespace {

template <typename F>
std::optional<double> pick(const std::optional<eval::ModelEval>& m, F f) {
  if (!m) return std::nullopt;
  return f(*m);
}

MetricRow row(std::string key, std::string label, Better better, DeltaKind delta, int decimals, double scale = 1) {
  MetricRow r;
  r.key = std::move(key);
  r.label = std::move(label);
  r.better = better;
  r.delta = delta;
  r.decimals = decimals;
  r.scale = scale;
  return r;
}

MetricRow with_model(MetricRow r, double v) {
  r.model = v;
  return r;
}

}  // namespace

std::vector<MetricRow> metric_rows(const eval::EvalResult& r) {
  std::vector<MetricRow> rows;
  const auto& base = r.base;
  const std::optional<eval::ModelEval> model = r.model;
  auto add = [&](MetricRow m, auto f) {
    m.base = pick(base, f);
    m.model = pick(model, f);
    if (m.base || m.model) rows.push_back(std::move(m));
  };
  add(row("disk_bytes", "size on disk (MiB)", Better::lower, DeltaKind::ratio, 1, 1.0 / (1024 * 1024)),
      [](const eval::ModelEval& m) -> std::optional<double> { return static_cast<double>(m.info.disk_bytes); });
  if (r.model.ppl) {
    const auto& p = *r.model.ppl;
    add(row("ppl",
            fmt::format("perplexity ({}, ctx {}, {} tokens)", eval::ppl_method_name(r.settings.ppl.method), r.settings.ppl.n_ctx,
                        p.tokens_scored),
            Better::lower, DeltaKind::relative, 4),
        [](const eval::ModelEval& m) -> std::optional<double> { return m.ppl ? std::optional(m.ppl->ppl) : std::nullopt; });
  }
  if (r.model.kl) {
    const auto& kl = *r.model.kl;
    rows.push_back(with_model(row("kl_mean", "KL divergence vs base, mean (nats)", Better::lower, DeltaKind::relative, 5), kl.mean));
    rows.push_back(
        with_model(row("kl_p99", "KL divergence vs base, 99th percentile (nats)", Better::lower, DeltaKind::relative, 5), kl.p99));
    rows.push_back(
        with_model(row("top1_agreement", "top-1 agreement with base (%)", Better::higher, DeltaKind::points, 2, 100), kl.top1_agreement));
  }
  for (std::size_t t = 0; t < r.model.tasks.size(); ++t) {
    const auto& task = r.model.tasks[t];
    const std::string n = fmt::format("{} items", task.items);
    auto task_of = [t](const eval::ModelEval& m) -> const eval::TaskResult& { return m.tasks[t]; };
    MetricRow acc = row(task.name + ".acc", fmt::format("{} {} (%, {})", task.name, task.completion ? "greedy match" : "acc", n),
                        Better::higher, DeltaKind::points, 2, 100);
    acc.base_err = base ? std::optional(task_of(*base).acc_stderr) : std::nullopt;
    acc.model_err = task.acc_stderr;
    add(acc, [&](const eval::ModelEval& m) -> std::optional<double> { return task_of(m).acc; });
    using Field = std::optional<double> eval::TaskResult::*;
    for (const auto& [metric, value, err] :
         {std::tuple<const char*, Field, Field>{"acc_norm", &eval::TaskResult::acc_norm, &eval::TaskResult::acc_norm_stderr},
          {"acc_bytes", &eval::TaskResult::acc_bytes, &eval::TaskResult::acc_bytes_stderr}}) {
      if (!(task.*value)) continue;
      MetricRow m =
          row(task.name + "." + metric, fmt::format("{} {} (%, {})", task.name, metric, n), Better::higher, DeltaKind::points, 2, 100);
      m.base_err = base ? task_of(*base).*err : std::nullopt;
      m.model_err = task.*err;
      add(m, [&, value = value](const eval::ModelEval& e) -> std::optional<double> { return task_of(e).*value; });
    }
    if (task.mean_loglik)
      add(row(task.name + ".mean_loglik", fmt::format("{} mean log-likelihood of the continuation (nats)", task.name), Better::higher,
              DeltaKind::relative, 4),
          [&](const eval::ModelEval& m) -> std::optional<double> { return task_of(m).mean_loglik; });
  }
  if (r.model.latency) {
    const auto& l = *r.model.latency;
    const std::string how = fmt::format("{} prompt + {} output tokens, median of {}", l.prompt_tokens, l.output_tokens, l.runs);
    add(row("ttft_ms", fmt::format("time to first token (ms; {})", how), Better::lower, DeltaKind::ratio, 1),
        [](const eval::ModelEval& m) -> std::optional<double> { return m.latency ? std::optional(m.latency->ttft_ms) : std::nullopt; });
    add(row("prefill_tokens_per_s", "prefill (tokens/s)", Better::higher, DeltaKind::ratio, 1),
        [](const eval::ModelEval& m) -> std::optional<double> {
          return m.latency ? std::optional(m.latency->prefill_tokens_per_s) : std::nullopt;
        });
    add(row("decode_tokens_per_s", "decode (tokens/s)", Better::higher, DeltaKind::ratio, 1),
        [](const eval::ModelEval& m) -> std::optional<double> {
          return m.latency ? std::optional(m.latency->decode_tokens_per_s) : std::nullopt;
        });
  }
  add(row("peak_device_bytes", "peak GPU memory (MiB; weights, KV cache, scratch)", Better::lower, DeltaKind::ratio, 1,
          1.0 / (1024 * 1024)),
      [](const eval::ModelEval& m) -> std::optional<double> {
        return m.peak_device_bytes ? std::optional(static_cast<double>(m.peak_device_bytes)) : std::nullopt;
      });
  // One process runs both models of a pair, so its peak is a single number (Environment section).
  if (!base && r.peak_rss_bytes > 0)
    rows.push_back(with_model(row("peak_rss_bytes", "peak resident memory (MiB)", Better::lower, DeltaKind::ratio, 1, 1.0 / (1024 * 1024)),
                              static_cast<double>(r.peak_rss_bytes)));
  return rows;
}

}  // namespace mo::report
