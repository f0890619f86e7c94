#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "mo/config/commands.h"
#include "mo/core/device.h"
#include "mo/core/error.h"
#include "mo/core/thread_pool.h"
#include "mo/eval/evaluate.h"
#include "mo/io/output_file.h"
#include "mo/report/eval_report.h"

namespace mo::app {
namespace {

eval::EvalSettings settings_of(const config::EvalConfig& c) {
  eval::EvalSettings s;
  s.text = c.text == "none" ? "" : c.text;
  s.ppl.method = c.ppl_method == "strided" ? eval::PplMethod::strided : eval::PplMethod::llama_cpp;
  s.ppl.n_ctx = static_cast<int>(c.ctx);
  s.ppl.stride = static_cast<int>(c.stride);
  s.ppl.max_windows = static_cast<int>(c.ppl_windows);
  s.tasks = c.tasks;
  s.limit = c.limit;
  s.latency = c.latency;
  s.latency_settings.prompt_tokens = static_cast<int>(c.latency_prompt_tokens);
  s.latency_settings.output_tokens = static_cast<int>(c.latency_output_tokens);
  s.latency_settings.runs = static_cast<int>(c.latency_runs);
  s.device = parse_device(c.device);
  return s;
}

class EvalCommand : public Command {
 public:
  const char* name() const override { return "eval"; }
  const char* summary() const override { return "perplexity, KL divergence, task accuracy, latency and peak memory of a model or a pair"; }
  void bind(config::Schema& s) override { config::bind(s, cfg_); }
  int run() override {
    if (cfg_.model_path.empty()) throw UsageError("model_path: no model given (eval MODEL [--base-model BASE])");
    if (cfg_.text == "none" && cfg_.tasks.empty() && !cfg_.latency)
      throw UsageError("text: none, no tasks and --no-latency leave nothing to evaluate");
    if (cfg_.ppl_method == "strided" && cfg_.stride > cfg_.ctx)
      throw UsageError(fmt::format("stride: {} is larger than ctx {}; windows would skip tokens", cfg_.stride, cfg_.ctx));
    if (cfg_.threads > 0) set_default_threads(static_cast<int>(cfg_.threads));
    if (!cfg_.output_path.empty()) {  // before the evaluation, which may take long
      const auto paths = report::report_paths(cfg_.output_path);
      io::check_new_output(paths.markdown, cfg_.force, "output_path");
      io::check_new_output(paths.json, cfg_.force, "output_path");
    }

    const eval::EvalResult r = eval::evaluate(cfg_.model_path, cfg_.base_model, settings_of(cfg_));
    report::ReportContext ctx;
    ctx.command = report::invoking_command_line();
    if (!cfg_.base_model.empty()) ctx.title = fmt::format("{} vs {}", r.model.info.name, r.base->info.name);
    if (eval::tasks_limited(r))
      ctx.notes.push_back(fmt::format("Tasks are limited to their first {} items: a quick run, not the full sets.", cfg_.limit));
    if (eval::ppl_limited(r))
      ctx.notes.push_back(
          fmt::format("Perplexity uses the first {} of the text's {} windows only.", r.model.ppl->windows, r.ppl_windows_available));

    report::ReportPaths paths;
    if (!cfg_.output_path.empty()) paths = report::write_report(cfg_.output_path, r, ctx, cfg_.force);
    if (cfg_.json) {
      std::cout << report::report_json(r, ctx).dump(2) << "\n";
      return 0;
    }
    std::cout << report::render_results(r) << "\n" << report::verdict(r, ctx) << "\n";
    if (!paths.markdown.empty()) std::cout << fmt::format("report: {} and {}\n", paths.markdown, paths.json);
    return 0;
  }

 private:
  config::EvalConfig cfg_;
};

}  // namespace

std::unique_ptr<Command> make_eval_command() { return std::make_unique<EvalCommand>(); }

}  // namespace mo::app
