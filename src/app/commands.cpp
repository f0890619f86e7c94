#include "mo/config/commands.h"

#include "cli.h"

namespace mo::app {
namespace {

// A command whose options are defined but whose module is not built yet: --help lists the
// options, running it says so and exits 2.
template <typename Config>
class PlannedCommand : public Command {
 public:
  PlannedCommand(const char* name, const char* summary) : name_(name), summary_(summary) {}
  const char* name() const override { return name_; }
  const char* summary() const override { return summary_; }
  void bind(config::Schema& s) override { config::bind(s, cfg_); }
  bool built() const override { return false; }
  int run() override { return 2; }

 private:
  const char* name_;
  const char* summary_;
  Config cfg_;
};

}  // namespace

std::vector<std::unique_ptr<Command>> all_commands() {
  std::vector<std::unique_ptr<Command>> out;
  out.push_back(make_quantize_command());
  out.push_back(std::make_unique<PlannedCommand<config::ServeConfig>>(
      "serve", "OpenAI-compatible server with continuous batching and a paged KV cache"));
  out.push_back(std::make_unique<PlannedCommand<config::BenchConfig>>(
      "bench", "load-test any OpenAI-compatible server: TTFT, TPOT, ITL, throughput; compare runs"));
  out.push_back(std::make_unique<PlannedCommand<config::DiagnoseConfig>>(
      "diagnose", "per-layer error of a quantized model against its original, with advice"));
  out.push_back(make_budget_command());
  out.push_back(std::make_unique<PlannedCommand<config::EvalConfig>>(
      "eval", "perplexity, KL divergence, task accuracy, latency and peak memory of a model or a pair"));
  out.push_back(make_generate_command());
  out.push_back(make_convert_command());
  out.push_back(make_inspect_command());
  return out;
}

}  // namespace mo::app
