#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "mo/bench/compare.h"
#include "mo/bench/report.h"
#include "mo/bench/runner.h"
#include "mo/config/commands.h"
#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/core/signals.h"
#include "mo/core/strings.h"
#include "mo/io/json_file.h"
#include "mo/io/output_file.h"

namespace mo::app {
namespace {

// --out and, with --report, the Markdown report and the plot beside it.
struct OutFiles {
  std::string json, md, svg;
};
OutFiles out_files(const config::BenchConfig& c) {
  if (c.out.empty()) return {};
  const std::filesystem::path out = c.out;
  if (!c.report) return {c.out, "", ""};
  return {c.out, std::filesystem::path(out).replace_extension(".md").string(),
          std::filesystem::path(out).replace_extension(".svg").string()};
}

nlohmann::json without_samples(nlohmann::json j) {
  for (auto& l : j["levels"]) l.erase("samples");
  return j;
}

class BenchCommand : public Command {
 public:
  const char* name() const override { return "bench"; }
  const char* summary() const override {
    return "load-test any OpenAI-compatible server: TTFT, TPOT, ITL, throughput; 'bench compare BASE NEW' gates regressions";
  }
  void bind(config::Schema& s) override { config::bind(s, cfg_); }
  int run() override { return cfg_.action.empty() && cfg_.base_results.empty() ? run_load() : run_compare(); }

 private:
  int run_compare() {
    if (cfg_.action != "compare" || cfg_.base_results.empty() || cfg_.new_results.empty())
      throw UsageError(fmt::format("bench: unexpected arguments '{}'; the only action is 'compare BASE.json NEW.json'",
                                   join({cfg_.action, cfg_.base_results, cfg_.new_results}, " ")));
    const auto limits = bench::parse_max_regression(cfg_.max_regression);
    const auto base = io::read_json(cfg_.base_results);
    const auto now = io::read_json(cfg_.new_results);
    const auto r = bench::compare_results(base, now, limits, cfg_.base_results, cfg_.new_results);
    std::cout << r.table;
    for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
    if (r.regression) {
      std::cout << "regression: a --max-regression limit was crossed\n";
      return kExitRuntime;
    }
    std::cout << (limits.empty() ? "no --max-regression limits given\n" : "no regression\n");
    return kExitOk;
  }

  bench::RunOptions options() const {
    bench::RunOptions o;
    o.ep.url = bench::parse_url(cfg_.base_url, "--base-url");
    o.ep.endpoint = cfg_.endpoint;
    o.ep.model = cfg_.model;
    o.ep.api_key = cfg_.api_key;
    o.ep.stream = cfg_.stream;
    o.ep.ignore_eos = cfg_.ignore_eos;
    o.ep.timeout_s = cfg_.timeout;
    o.levels = bench::parse_levels(cfg_.concurrency);
    o.request_rate = cfg_.request_rate;
    o.arrival = cfg_.arrival;
    o.warmup = cfg_.warmup;
    o.workload.input = {cfg_.input_len_dist, cfg_.input_len, cfg_.input_len_spread};
    o.workload.output = {cfg_.output_len_dist, cfg_.output_len, cfg_.output_len_spread};
    o.workload.dataset = cfg_.dataset;
    o.workload.num_prompts = cfg_.num_prompts;
    o.workload.seed = static_cast<std::uint64_t>(cfg_.seed);
    o.slo = bench::parse_slo(cfg_.slo);
    o.progress = cfg_.progress && !cfg_.json;
    if (!cfg_.dataset.empty()) bench::load_dataset_prompts(cfg_.dataset);  // bad file: fail before any load
    if (!cfg_.out.empty()) {
      const auto dir = std::filesystem::absolute(cfg_.out).parent_path();
      if (!std::filesystem::is_directory(dir))
        throw UsageError(fmt::format("--out '{}': directory {} does not exist", cfg_.out, dir.string()));
    }
    if (cfg_.report && cfg_.out.empty()) throw UsageError("report: needs --out (the report and the plot go beside the results file)");
    // Every file this run will write, checked before the load starts (io/output_file.h's policy).
    const OutFiles files = out_files(cfg_);
    if (cfg_.report && (files.md == files.json || files.svg == files.json))
      throw UsageError(fmt::format("--out '{}': with --report the results need a name whose .md and .svg twins differ from it", cfg_.out));
    for (const auto& f : {files.json, files.md, files.svg})
      if (!f.empty()) io::check_new_output(f, cfg_.force, "out");
    return o;
  }

  nlohmann::json workload_json() const {
    return {{"endpoint", cfg_.endpoint},
            {"stream", cfg_.stream},
            {"concurrency", cfg_.concurrency},
            {"request_rate", cfg_.request_rate},
            {"arrival", cfg_.arrival},
            {"num_prompts", cfg_.num_prompts},
            {"warmup", cfg_.warmup},
            {"input_len", cfg_.input_len},
            {"input_len_dist", cfg_.input_len_dist},
            {"input_len_spread", cfg_.input_len_spread},
            {"output_len", cfg_.output_len},
            {"output_len_dist", cfg_.output_len_dist},
            {"output_len_spread", cfg_.output_len_spread},
            {"dataset", cfg_.dataset},
            {"ignore_eos", cfg_.ignore_eos},
            {"timeout_s", cfg_.timeout},
            {"slo", cfg_.slo},
            {"seed", cfg_.seed}};
  }

  // /v1/models: server info for the results, and the model name when none was given.
  void ask_models(bench::RunOptions& o, bench::RunContext& ctx) const {
    bench::HttpRequest req;
    req.path = o.ep.url.path_prefix + "/models";
    req.timeout_s = std::min(cfg_.timeout, 30.0);
    if (!o.ep.api_key.empty()) req.headers.emplace_back("Authorization", "Bearer " + o.ep.api_key);
    // A model list is a few KiB; a larger answer is not read (a 30 MB one cost 1 GB as parsed JSON).
    constexpr std::size_t kMaxModelsBytes = std::size_t{1} << 20;
    std::string body;
    bool too_large = false;
    const auto r = bench::http_send(o.ep.url, req, [&](std::string_view piece) {
      too_large = body.size() + piece.size() > kMaxModelsBytes;
      if (!too_large) body.append(piece);
      return !too_large;
    });
    nlohmann::json j = r.ok && r.status == 200 ? nlohmann::json::parse(body, nullptr, false) : nlohmann::json();
    if (j.is_object() && j.contains("data") && j["data"].is_array()) {
      ctx.server_models = j["data"];
    } else {
      ctx.server_note = too_large         ? fmt::format("the answer is over {} MiB; not read", kMaxModelsBytes >> 20)
                        : !r.ok           ? r.error
                        : r.status != 200 ? fmt::format("HTTP {}", r.status)
                                          : "the answer has no \"data\" list";
    }
    if (o.ep.model.empty()) {
      if (ctx.server_models.empty() || !ctx.server_models[0].contains("id"))
        throw Error(fmt::format("--base-url {}: cannot list models at {}/models ({}); is the server up? pass --model to skip this",
                                cfg_.base_url, cfg_.base_url, ctx.server_note.empty() ? "empty list" : ctx.server_note));
      o.ep.model = ctx.server_models[0]["id"].get<std::string>();
    }
    ctx.model = o.ep.model;
  }

  int run_load() {
    bench::RunOptions o = options();
    bench::RunContext ctx;
    ctx.base_url = cfg_.base_url;
    ctx.started_at = bench::utc_now_iso();
    ctx.workload = workload_json();
    ask_models(o, ctx);
    if (!ctx.server_note.empty()) log::warn("bench: /v1/models: {}", ctx.server_note);

    // The first Ctrl-C stops the run and keeps what was measured; a second one ends the process.
    std::atomic<bool> stop{false};
    const signals::OnStopSignal on_stop([&](int sig) {
      if (stop.exchange(true)) signals::die_of(sig);
    });
    const bench::RunResult result = bench::run_benchmark(o, stop);
    if (!result.calibration.measured) log::warn("bench: prompt lengths {}", result.calibration.note);
    const nlohmann::json results = bench::results_json(result, ctx);

    // Error texts quote what servers sent, which may not be UTF-8: replaced, so the results are always written.
    constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
    if (cfg_.json)
      std::cout << without_samples(results).dump(2, ' ', false, kReplace) << "\n";
    else
      std::cout << bench::terminal_table(results);
    if (!cfg_.out.empty()) {
      const OutFiles files = out_files(cfg_);
      nlohmann::json marked = results;
      marked[io::kWrittenByKey] = io::written_by_value();
      io::write_output_file(files.json, marked.dump(1, ' ', false, kReplace) + "\n", cfg_.force, "out");
      if (cfg_.report) {
        io::write_output_file(files.svg, io::with_file_marker(bench::svg_plot(results)), cfg_.force, "out");
        const std::string svg_name = std::filesystem::path(files.svg).filename().string();
        io::write_output_file(files.md, io::with_file_marker(bench::markdown_report(results, svg_name)), cfg_.force, "out");
      }
      if (!cfg_.json)
        std::cout << (cfg_.report ? fmt::format("wrote {}, {}, {}\n", files.json, files.md, files.svg)
                                  : fmt::format("wrote {}\n", files.json));
    }
    if (result.interrupted) {
      std::cerr << "bench: interrupted; the results above are partial\n";
      return 130;
    }
    long long completed = 0;
    for (const auto& l : result.levels) completed += l.summary.completed;
    if (completed == 0) {
      std::cerr << "error: bench: no request succeeded (see the failure reasons above)\n";
      return kExitRuntime;
    }
    return kExitOk;
  }

  config::BenchConfig cfg_;
};

}  // namespace

std::unique_ptr<Command> make_bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace mo::app
