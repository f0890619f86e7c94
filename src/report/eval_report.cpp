#include "mo/report/eval_report.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "environment.h"
#include "metric_rows.h"
#include "mo/core/error.h"
#include "mo/core/progress.h"
#include "mo/core/strings.h"
#include "mo/io/json_file.h"
#include "mo/io/output_file.h"

namespace fs = std::filesystem;

namespace mo::report {
namespace {

struct Delta {
  std::string text;  // "+2.10%", "-0.84 points", "3.60x smaller"
  int sign = 0;      // +1 better, -1 worse, 0 no change
  bool within_noise = false;
};

std::optional<Delta> delta_of(const MetricRow& row) {
  if (!row.base || !row.model || row.better == Better::none) return std::nullopt;
  const double b = *row.base, m = *row.model;
  Delta d;
  const double diff = m - b;
  d.sign = diff == 0 ? 0 : ((diff < 0) == (row.better == Better::lower) ? 1 : -1);
  switch (row.delta) {
    case DeltaKind::relative:
      if (b == 0) return std::nullopt;
      d.text = fmt::format("{:+.2f}%", diff / std::abs(b) * 100);
      break;
    case DeltaKind::points:
      d.text = fmt::format("{:+.2f} points", diff * row.scale);
      if (row.base_err && row.model_err)
        d.within_noise = std::abs(diff) < 1.96 * std::sqrt(*row.base_err * *row.base_err + *row.model_err * *row.model_err);
      break;
    case DeltaKind::ratio: {
      if (b <= 0 || m <= 0) return std::nullopt;
      const double x = row.better == Better::lower ? b / m : m / b;  // > 1 means better
      const bool size = row.key == "disk_bytes";
      const char* good = size ? "smaller" : "faster";
      const char* bad = size ? "larger" : "slower";
      d.text = x >= 1 ? fmt::format("{:.2f}x {}", x, good) : fmt::format("{:.2f}x {}", 1 / x, bad);
      break;
    }
  }
  return d;
}

std::string value_text(const MetricRow& row, const std::optional<double>& v, const std::optional<double>& err) {
  if (!v) return "—";
  std::string s = fmt::format("{:.{}f}", *v * row.scale, row.decimals);
  if (err) s += fmt::format(" ± {:.{}f}", *err * row.scale, row.decimals);
  return s;
}

std::string delta_cell(const MetricRow& row) {
  const auto d = delta_of(row);
  if (!d) return "";
  if (d->sign == 0) return "no change";
  if (d->within_noise) return d->text + (d->sign < 0 ? " worse" : " better") + " (within noise)";
  return d->sign < 0 ? "**" + d->text + " worse**" : d->text + " better";
}

const MetricRow* find_row(const std::vector<MetricRow>& rows, const std::string& key) {
  for (const auto& r : rows)
    if (r.key == key) return &r;
  return nullptr;
}

}  // namespace

std::string verdict(const eval::EvalResult& r, const ReportContext& ctx) {
  const auto rows = metric_rows(r);
  std::vector<std::string> quality, speed;
  const std::string who = !ctx.method.empty() ? ctx.method : r.model.info.name;
  if (!r.base) {
    if (const auto* p = find_row(rows, "ppl")) quality.push_back(fmt::format("perplexity {:.3f}", *p->model));
    for (const auto& t : r.model.tasks) quality.push_back(fmt::format("{} {:.1f}%", t.name, t.acc * 100));
    if (r.model.latency) speed.push_back(fmt::format("decode {:.1f} tokens/s", r.model.latency->decode_tokens_per_s));
  } else {
    if (const auto* s = find_row(rows, "disk_bytes"); s && delta_of(*s)) quality.push_back(delta_of(*s)->text);
    if (const auto* p = find_row(rows, "ppl"); p && delta_of(*p)) quality.push_back("perplexity " + delta_of(*p)->text);
    if (r.model.kl) quality.push_back(fmt::format("top-1 agreement {:.1f}%", r.model.kl->top1_agreement * 100));
    for (const auto& t : r.model.tasks)
      if (const auto* a = find_row(rows, t.name + ".acc"); a && delta_of(*a)) quality.push_back(t.name + " " + delta_of(*a)->text);
    if (const auto* dec = find_row(rows, "decode_tokens_per_s"); dec && delta_of(*dec)) speed.push_back("decode " + delta_of(*dec)->text);
  }
  std::string v = who + ": " + join(quality);
  if (!speed.empty()) v += "; " + join(speed);
  return v;
}

std::string render_results(const eval::EvalResult& r) {
  const auto rows = metric_rows(r);
  std::string md;
  if (r.base) {
    md += "| metric | base | model | delta |\n|---|---:|---:|---|\n";
    for (const auto& row : rows)
      md += fmt::format("| {} | {} | {} | {} |\n", row.label, value_text(row, row.base, row.base_err),
                        value_text(row, row.model, row.model_err), delta_cell(row));
  } else {
    md += "| metric | value |\n|---|---:|\n";
    for (const auto& row : rows) md += fmt::format("| {} | {} |\n", row.label, value_text(row, row.model, row.model_err));
  }
  return md;
}

std::string render_markdown(const eval::EvalResult& r, const ReportContext& ctx) {
  const bool pair = r.base.has_value();
  std::string md = fmt::format("# {}\n\n", ctx.title.empty() ? "Evaluation of " + r.model.info.name : ctx.title);
  md += fmt::format("**Verdict:** {}\n\n", verdict(r, ctx));
  for (const auto& n : ctx.notes) md += fmt::format("> {}\n>\n", n);
  if (!ctx.notes.empty()) md.resize(md.size() - 2), md += "\n";

  md += "## Results\n\n" + render_results(r) + "\n";
  if (pair)
    md +=
        "Delta is the model against the base; **bold** marks the direction that is worse. Accuracy deltas are in percentage "
        "points, ± is the standard error, and \"within noise\" means the difference is under 1.96 combined standard errors. "
        "KL divergence and top-1 agreement compare each next-token distribution with the base's on the perplexity text.\n\n";

  md += "## Models\n\n| | path | format | weights | size on disk |\n|---|---|---|---|---:|\n";
  auto model_line = [&](const char* who, const eval::ModelEval& m) {
    md += fmt::format("| {} | `{}` | {} | {} | {} |\n", who, m.info.path, m.info.format, m.info.weights,
                      format_bytes(static_cast<double>(m.info.disk_bytes)));
  };
  if (pair) model_line("base", *r.base);
  model_line(pair ? "model" : "", r.model);

  md += "\n## Settings\n\n";
  if (r.model.ppl) {
    const auto& s = r.settings.ppl;
    md += fmt::format(
        "- Perplexity: `{}` method on `{}` ({} tokens, line endings normalised), ctx {}{}, {} windows, {} tokens scored, "
        "KV cache f16.{}\n",
        eval::ppl_method_name(s.method), r.text_path, r.text_tokens, s.n_ctx,
        s.method == eval::PplMethod::strided ? fmt::format(", stride {}", s.stride) : "", r.model.ppl->windows, r.model.ppl->tokens_scored,
        eval::ppl_limited(r) ? fmt::format(" Limited to the first {} of {} windows.", r.model.ppl->windows, r.ppl_windows_available) : "");
  } else {
    md += "- Perplexity: not run (no text).\n";
  }
  for (const auto& t : r.model.tasks) {
    md += fmt::format("- Task `{}` ({}): {} of {} items{}{}.\n", t.name, t.path, t.items, t.total_items,
                      t.items < t.total_items ? " (limited: a quick run, not the full set)" : "",
                      t.completion ? ", greedy continuation must match" : fmt::format(", chance level {:.1f}%", t.chance * 100));
  }
  if (r.model.latency) {
    const auto& l = *r.model.latency;
    md +=
        fmt::format("- Latency: {} prompt tokens, {} greedy output tokens (EOS ignored), 1 warm-up then {} measured runs, medians shown.\n",
                    l.prompt_tokens, l.output_tokens, l.runs);
  }

  if (ctx.decisions) {
    const auto& d = *ctx.decisions;
    md += fmt::format("\n## Per-layer decisions\n\nFrom `{}`: {} modules.\n\n| format | modules | stored |\n|---|---:|---:|\n", d.path,
                      d.modules);
    for (const auto& [fmt_name, n] : d.by_format)
      md += fmt::format("| {} | {} | {} |\n", fmt_name, n, format_bytes(static_cast<double>(d.bytes_by_format.at(fmt_name))));
    if (d.changed.empty()) {
      md += "\nEvery module was written in the requested format.\n";
    } else {
      md += fmt::format("\n{} modules differ from the request:\n\n", d.changed.size());
      for (std::size_t i = 0; i < d.changed.size() && i < 12; ++i)
        md += fmt::format("- `{}`: {} instead of {}{}\n", d.changed[i].module, d.changed[i].format, d.changed[i].requested,
                          d.changed[i].reason.empty() ? "" : " — " + d.changed[i].reason);
      if (d.changed.size() > 12) md += fmt::format("- … and {} more (see the decision log)\n", d.changed.size() - 12);
    }
    if (!d.lowest_cosine.empty()) {
      md += fmt::format("\nOutput cosine similarity on the calibration inputs: mean {:.5f}; lowest:\n\n", d.mean_cosine);
      for (const auto& row : d.lowest_cosine) md += fmt::format("- `{}` ({}): {:.5f}\n", row.module, row.format, row.cosine);
    }
  }

  const Environment env = environment();
  md += fmt::format(
      "\n## Environment\n\n- CPU: {} ({} logical cores), {} threads used\n- Build: {}\n"
      "- Peak resident memory of the evaluation process: {}{}\n- Evaluation time: {}\n",
      env.cpu, env.logical_cores, r.threads, env.build, format_bytes(static_cast<double>(r.peak_rss_bytes)),
      pair ? " (both models loaded)" : "", format_duration(r.seconds));
  if (r.model.device != "cpu" && !r.model.device.empty()) md += fmt::format("- Device: {}\n", r.model.device);
  if (!ctx.command.empty()) md += fmt::format("\nProduced by:\n\n```\n{}\n```\n", ctx.command);
  return md;
}

nlohmann::json report_json(const eval::EvalResult& r, const ReportContext& ctx) {
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& row : metric_rows(r)) {
    nlohmann::json m;
    if (row.base) m["base"] = *row.base;
    if (row.model) m["model"] = *row.model;
    if (row.base_err) m["base_stderr"] = *row.base_err;
    if (row.model_err) m["model_stderr"] = *row.model_err;
    m["better"] = row.better == Better::lower ? "lower" : row.better == Better::higher ? "higher" : "none";
    if (const auto d = delta_of(row)) {
      m["delta"] = d->text;
      m["worse"] = d->sign < 0;
    }
    metrics[row.key] = m;
  }
  auto model_json = [](const eval::ModelEval& m) {
    nlohmann::json j = {{"path", m.info.path}, {"format", m.info.format}, {"weights", m.info.weights}, {"disk_bytes", m.info.disk_bytes}};
    if (m.ppl)
      j["perplexity"] = {
          {"ppl", m.ppl->ppl}, {"nll_mean", m.ppl->nll_mean}, {"windows", m.ppl->windows}, {"tokens_scored", m.ppl->tokens_scored}};
    if (m.kl)
      j["kl"] = {
          {"mean", m.kl->mean}, {"p99", m.kl->p99}, {"max", m.kl->max}, {"top1_agreement", m.kl->top1_agreement}, {"tokens", m.kl->tokens}};
    for (const auto& t : m.tasks) {
      nlohmann::json tj = {
          {"path", t.path}, {"items", t.items}, {"total_items", t.total_items}, {"acc", t.acc}, {"acc_stderr", t.acc_stderr}};
      if (t.acc_norm) tj["acc_norm"] = *t.acc_norm, tj["acc_norm_stderr"] = *t.acc_norm_stderr, tj["chance"] = t.chance;
      if (t.acc_bytes) tj["acc_bytes"] = *t.acc_bytes, tj["acc_bytes_stderr"] = *t.acc_bytes_stderr;
      if (t.mean_loglik) tj["mean_loglik"] = *t.mean_loglik;
      j["tasks"][t.name] = tj;
    }
    if (m.latency) {
      const auto& l = *m.latency;
      j["latency"] = {{"prompt_tokens", l.prompt_tokens},
                      {"output_tokens", l.output_tokens},
                      {"runs", l.runs},
                      {"ttft_ms", l.ttft_ms},
                      {"prefill_tokens_per_s", l.prefill_tokens_per_s},
                      {"decode_tokens_per_s", l.decode_tokens_per_s},
                      {"ttft_ms_runs", l.ttft_ms_runs},
                      {"decode_tokens_per_s_runs", l.decode_tokens_per_s_runs}};
    }
    return j;
  };
  const Environment env = environment();
  const auto& s = r.settings;
  nlohmann::json j = {
      {"verdict", verdict(r, ctx)},
      {"notes", ctx.notes},
      {"metrics", metrics},
      {"model", model_json(r.model)},
      {"settings",
       {{"text", r.text_path},
        {"text_tokens", r.text_tokens},
        {"ppl_method", eval::ppl_method_name(s.ppl.method)},
        {"ctx", s.ppl.n_ctx},
        {"stride", s.ppl.stride},
        {"max_windows", s.ppl.max_windows},
        {"tasks", s.tasks},
        {"limit", s.limit}}},
      {"environment",
       {{"cpu", env.cpu},
        {"logical_cores", env.logical_cores},
        {"threads", r.threads},
        {"build", env.build},
        {"peak_rss_bytes", r.peak_rss_bytes},
        {"seconds", r.seconds}}},
  };
  if (r.base) j["base"] = model_json(*r.base);
  if (!ctx.command.empty()) j["command"] = ctx.command;
  if (ctx.decisions) {
    j["decisions"] = {{"path", ctx.decisions->path},
                      {"modules", ctx.decisions->modules},
                      {"by_format", ctx.decisions->by_format},
                      {"changed", ctx.decisions->changed.size()},
                      {"mean_cosine", ctx.decisions->mean_cosine}};
  }
  return j;
}

std::string invoking_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string out, arg;
  while (std::getline(in, arg, '\0')) {
    const bool quote = arg.empty() || arg.find_first_of(" \t\"'$") != std::string::npos;
    out += (out.empty() ? "" : " ") + (quote ? "'" + arg + "'" : arg);
  }
  return out;
}

ReportPaths report_paths(const std::string& dir) {
  std::error_code ec;
  const bool beside = !fs::is_directory(dir, ec) && (fs::is_regular_file(dir, ec) || dir.ends_with(".gguf"));
  if (beside) return {dir + ".report.md", dir + ".report.json"};
  return {(fs::path(dir) / "report.md").string(), (fs::path(dir) / "report.json").string()};
}

ReportPaths write_report(const std::string& dir, const eval::EvalResult& r, const ReportContext& ctx, bool force) {
  const ReportPaths p = report_paths(dir);
  std::error_code ec;
  fs::create_directories(fs::path(p.markdown).parent_path(), ec);
  if (ec) throw UsageError(fmt::format("output_path: cannot create {}: {}", dir, ec.message()));
  io::write_output_file(p.markdown, io::with_file_marker(render_markdown(r, ctx)), force, "output_path");
  nlohmann::json j = report_json(r, ctx);
  j[io::kWrittenByKey] = io::written_by_value();
  io::write_output_file(p.json, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", force, "output_path");
  return p;
}

}  // namespace mo::report
