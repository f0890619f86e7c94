#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "mo/config/commands.h"
#include "mo/core/device.h"
#include "mo/core/error.h"
#include "mo/core/thread_pool.h"
#include "mo/diagnose/diagnose.h"
#include "mo/diagnose/report.h"
#include "mo/io/output_file.h"

namespace mo::app {
namespace {

class DiagnoseCommand : public Command {
 public:
  const char* name() const override { return "diagnose"; }
  const char* summary() const override { return "per-layer error of a quantized model against its original, with advice"; }
  void bind(config::Schema& s) override { config::bind(s, cfg_); }
  int run() override {
    if (cfg_.threads > 0) set_default_threads(static_cast<int>(cfg_.threads));
    if (!cfg_.output_path.empty()) {  // before the run, which may take long
      const auto p = diagnose::report_paths(cfg_.output_path);
      for (const auto& f : {p.markdown, p.json, p.svg}) io::check_new_output(f, cfg_.force, "output_path");
    }
    diagnose::DiagnoseOptions opt;
    opt.original = cfg_.original;
    opt.quantized = cfg_.quantized;
    opt.data = cfg_.data;
    opt.data_field = cfg_.data_field;
    opt.threshold = cfg_.threshold;
    opt.num_samples = cfg_.num_samples;
    opt.max_seq_len = cfg_.max_seq_len;
    opt.seed = static_cast<std::uint64_t>(cfg_.seed);
    opt.device = parse_device(cfg_.device);
    const diagnose::DiagnoseResult r = diagnose::run_diagnose(opt);

    diagnose::ReportPaths paths;
    if (!cfg_.output_path.empty()) paths = diagnose::write_reports(cfg_.output_path, r, cfg_.force);
    if (cfg_.json) {
      std::cout << diagnose::to_json(r).dump(2) << "\n";
      return 0;
    }
    std::cout << diagnose::render_terminal(r);
    if (!paths.markdown.empty()) std::cout << fmt::format("report: {}, {} and {}\n", paths.markdown, paths.json, paths.svg);
    return 0;
  }

 private:
  config::DiagnoseConfig cfg_;
};

}  // namespace

std::unique_ptr<Command> make_diagnose_command() { return std::make_unique<DiagnoseCommand>(); }

}  // namespace mo::app
