#include <fmt/format.h>

#include <cctype>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "quantize_options.h"
#include "mo/budget/quant_job.h"
#include "mo/config/commands.h"
#include "mo/core/log.h"
#include "mo/core/memory.h"
#include "mo/engine/backend.h"
#include "mo/model/model_presets.h"
#include "mo/core/progress.h"
#include "mo/core/strings.h"
#include "mo/core/device.h"
#include "mo/core/error.h"
#include "mo/core/thread_pool.h"
#include "mo/eval/evaluate.h"
#include "mo/io/output_file.h"
#include "mo/quant/quantize.h"
#include "mo/report/eval_report.h"

namespace mo::app {
namespace {

std::string to_upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

// "AWQ INT4 g128", "GGUF Q4_K_M", "FP8": what the verdict line calls the quantized model.
std::string method_label(const config::QuantizeConfig& c) {
  if (c.quant_method == "gguf") return "GGUF " + to_upper(c.gguf_type);
  if (c.quant_method == "fp8") return "FP8";
  return fmt::format("{} INT{} {}", to_upper(c.quant_method), c.bits, c.group_size > 0 ? fmt::format("g{}", c.group_size) : "per-channel");
}

eval::EvalSettings eval_settings_of(const config::QuantizeConfig& c) {
  eval::EvalSettings s;
  s.text = c.eval_text == "none" ? "" : c.eval_text;
  s.ppl.n_ctx = static_cast<int>(c.eval_ctx);
  s.ppl.max_windows = static_cast<int>(c.eval_ppl_windows);
  s.tasks = c.eval_tasks;
  s.limit = c.eval_limit;
  s.latency = c.eval_latency;
  s.device = parse_device(c.device);
  return s;
}

// Evaluates the source against the new model and writes report.md/report.json beside (or into) the output.
report::ReportPaths evaluate_output(const config::QuantizeConfig& cfg, const quant::QuantizeReport& r, std::string* verdict) {
  try {
    const eval::EvalResult e = eval::evaluate(r.output, cfg.model_path, eval_settings_of(cfg));
    report::ReportContext ctx;
    ctx.title = fmt::format("{}: {} → {}", method_label(cfg), e.base->info.name, e.model.info.name);
    ctx.method = method_label(cfg);
    ctx.command = report::invoking_command_line();
    ctx.decisions =
        report::summarize_decisions(r.output.ends_with(".gguf") ? r.output + ".decisions.jsonl" : r.output + "/decisions.jsonl");
    ctx.notes.push_back(
        r.calibration_used_samples > 0 && r.calibration_used_samples < r.calibration_samples
            ? fmt::format("Calibration: {} ({} samples, {} tokens; the calibration passes read {} of the samples, {} tokens).",
                          r.calibration, r.calibration_samples, r.calibration_tokens, r.calibration_used_samples, r.calibration_used_tokens)
            : fmt::format("Calibration: {} ({} samples, {} tokens).", r.calibration, r.calibration_samples, r.calibration_tokens));
    if (eval::tasks_limited(e))
      ctx.notes.push_back(
          fmt::format("Tasks are limited to their first {} items (eval_limit): a quick run, not the full sets.", cfg.eval_limit));
    if (eval::ppl_limited(e))
      ctx.notes.push_back(fmt::format("Perplexity and KL use the first {} of the text's {} windows (eval_ppl_windows).",
                                      e.model.ppl->windows, e.ppl_windows_available));
    *verdict = report::verdict(e, ctx);
    return report::write_report(r.output, e, ctx, cfg.force);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("evaluation: {} (the quantized model at {} is complete; evaluate it later with `model-optimizer eval`)",
                                 e.what(), r.output));
  }
}

// Prints the job's memory (budget/quant_job.h) and refuses, with the num_samples that fits, when this
// machine does not have it. A model the shape reader cannot open is left to quantize_model's own error.
void check_job_memory(const quant::QuantizeOptions& o) {
  if (o.method == quant::Method::gguf || o.model_path.empty()) return;
  model::ModelShape shape;
  try {
    shape = model::load_model_shape(o.model_path);
  } catch (const UsageError&) {
    return;
  }
  budget::QuantJobRequest r;
  r.hp = shape.hp;
  r.method = quant::method_name(o.method);
  r.sensitivity_check = o.sensitivity_check;
  r.samples = o.num_samples;
  r.seq_len = o.max_seq_len;
  r.on_gpu = o.device == Device::cuda;
  const budget::QuantJobMemory m = budget::quant_job_memory(r);
  const std::uint64_t host = available_memory_bytes();
  std::uint64_t gpu = 0;
  std::string gpu_name;
  if (r.on_gpu) {
    const auto b = engine::make_cuda_backend(0);
    gpu = b->memory().free;
    gpu_name = b->describe();
  }
  const std::string where = fmt::format("{} of host memory ({} available){}", format_bytes(static_cast<double>(m.host())),
                                        format_bytes(static_cast<double>(host)),
                                        r.on_gpu ? fmt::format(" and {} on {} ({} free)", format_bytes(static_cast<double>(m.gpu())),
                                                               gpu_name, format_bytes(static_cast<double>(gpu)))
                                                 : std::string());
  log::info("quantize memory ({} samples x {} tokens): {} = {}", r.samples, r.seq_len, m.terms(), where);
  if (m.host() <= host && m.gpu() <= gpu) return;
  const std::int64_t n = budget::max_samples_that_fit(r, host, gpu);
  throw UsageError(fmt::format("quantize: num_samples {} x max_seq_len {} needs {}: {}; {}", r.samples, r.seq_len, where, m.terms(),
                               n > 0 ? fmt::format("num_samples {} fits at max_seq_len {} (or shorten max_seq_len)", n, r.seq_len)
                                     : std::string("not even one sample fits: shorten max_seq_len, or use a machine with more memory")));
}

class QuantizeCommand : public Command {
 public:
  const char* name() const override { return "quantize"; }
  const char* summary() const override {
    return "quantize a model (RTN, AWQ, GPTQ, FP8) on your calibration data into a new directory vLLM, Transformers and serve load";
  }
  void bind(config::Schema& s) override { config::bind(s, cfg_); }
  int run() override {
    if (cfg_.threads > 0) set_default_threads(static_cast<int>(cfg_.threads));
    const quant::QuantizeOptions options = quantize_options(cfg_);
    // A report beside a .gguf output is checked now, so that hours of work never end in a refused write.
    if (cfg_.eval && cfg_.load_format != "dummy" && cfg_.output_path.ends_with(".gguf")) {
      const auto paths = report::report_paths(cfg_.output_path);
      io::check_new_output(paths.markdown, cfg_.force, "output_path");
      io::check_new_output(paths.json, cfg_.force, "output_path");
    }
    check_job_memory(options);
    quant::QuantizeReport r = quant::quantize_model(options);
    if (cfg_.json) {
      nlohmann::json j = {{"input", r.input},
                          {"output", r.output},
                          {"method", r.method},
                          {"summary", r.summary},
                          {"layout", r.layout},
                          {"loads_in", r.loaders},
                          {"name_suggestion", r.name_suggestion},
                          {"input_bytes", r.input_bytes},
                          {"output_bytes", r.output_bytes},
                          {"seconds", r.seconds},
                          {"peak_rss_bytes", r.peak_rss},
                          {"peak_device_bytes", r.peak_device},
                          {"notes", r.notes}};
      if (cfg_.eval && cfg_.load_format != "dummy") {
        std::string verdict;
        const auto paths = evaluate_output(cfg_, r, &verdict);
        j["report"] = {{"markdown", paths.markdown}, {"json", paths.json}, {"verdict", verdict}};
      }
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    int changed = 0;
    for (const auto& d : r.decisions) changed += !d.reason.empty();
    std::cout << fmt::format("quantized {} -> {}\n", r.input, r.output);
    std::cout << fmt::format("  {}\n", r.summary);
    if (!r.layout.empty()) std::cout << fmt::format("  layout: {}; loads in: {}\n", r.layout, r.loaders);
    if (r.input_bytes > 0)
      std::cout << fmt::format("  size: {} -> {} of tensor data ({:.2f}x smaller)\n", format_bytes(r.input_bytes),
                               format_bytes(r.output_bytes), static_cast<double>(r.input_bytes) / static_cast<double>(r.output_bytes));
    else
      std::cout << fmt::format("  size: {} of tensor data\n", format_bytes(r.output_bytes));
    std::cout << fmt::format("  time: {}, peak memory {}{}\n", format_duration(r.seconds), format_bytes(r.peak_rss),
                             r.device.empty() ? std::string() : fmt::format(" (host), {} on {}", format_bytes(r.peak_device), r.device));
    std::cout << fmt::format("  decisions: {} of {} modules differ from the request (see {})\n", changed, r.decisions.size(),
                             r.output.ends_with(".gguf") ? r.output + ".decisions.jsonl" : r.output + "/decisions.jsonl");
    std::cout << fmt::format("  suggested name: {}\n", r.name_suggestion);
    for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
    if (!cfg_.eval) return 0;
    if (cfg_.load_format == "dummy") {
      std::cout << "note: no evaluation for random (dummy) weights\n";
      return 0;
    }
    std::cout << std::flush;
    std::string verdict;
    const auto paths = evaluate_output(cfg_, r, &verdict);
    std::cout << fmt::format("  verdict: {}\n  report: {}\n", verdict, paths.markdown);
    return 0;
  }

 private:
  config::QuantizeConfig cfg_;
};

}  // namespace

std::unique_ptr<Command> make_quantize_command() { return std::make_unique<QuantizeCommand>(); }

}  // namespace mo::app
