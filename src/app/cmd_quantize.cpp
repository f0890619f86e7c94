#include <fmt/format.h>

#include <iostream>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "mo/config/commands.h"
#include "mo/core/progress.h"
#include "mo/core/strings.h"
#include "mo/core/thread_pool.h"
#include "mo/quant/quantize.h"

namespace mo::app {
namespace {

class QuantizeCommand : public Command {
 public:
  const char* name() const override { return "quantize"; }
  const char* summary() const override {
    return "quantize a model (RTN, AWQ, GPTQ, FP8) on your calibration data into a new directory vLLM, Transformers and serve load";
  }
  void bind(config::Schema& s) override { config::bind(s, cfg_); }
  int run() override {
    if (cfg_.threads > 0) set_default_threads(static_cast<int>(cfg_.threads));
    quant::QuantizeReport r = quant::quantize_model(cfg_);
    if (cfg_.json) {
      nlohmann::json j = {{"input", r.input}, {"output", r.output}, {"method", r.method}, {"summary", r.summary},
                          {"name_suggestion", r.name_suggestion}, {"input_bytes", r.input_bytes}, {"output_bytes", r.output_bytes},
                          {"seconds", r.seconds}, {"peak_rss_bytes", r.peak_rss}, {"notes", r.notes}};
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    int changed = 0;
    for (const auto& d : r.decisions) changed += !d.reason.empty();
    std::cout << fmt::format("quantized {} -> {}\n", r.input, r.output);
    std::cout << fmt::format("  {}\n", r.summary);
    if (r.input_bytes > 0)
      std::cout << fmt::format("  size: {} -> {} of tensor data ({:.2f}x smaller)\n", format_bytes(r.input_bytes), format_bytes(r.output_bytes),
                               static_cast<double>(r.input_bytes) / static_cast<double>(r.output_bytes));
    else
      std::cout << fmt::format("  size: {} of tensor data\n", format_bytes(r.output_bytes));
    std::cout << fmt::format("  time: {}, peak memory {}\n", format_duration(r.seconds), format_bytes(r.peak_rss));
    std::cout << fmt::format("  decisions: {} of {} modules differ from the request (see {})\n", changed, r.decisions.size(),
                             r.output.ends_with(".gguf") ? r.output + ".decisions.jsonl" : r.output + "/decisions.jsonl");
    std::cout << fmt::format("  suggested name: {}\n", r.name_suggestion);
    for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
    if (cfg_.eval) std::cout << "note: the before/after evaluation (report.md) is not built in this version; pass --no-eval to silence this\n";
    return 0;
  }

 private:
  config::QuantizeConfig cfg_;
};

}  // namespace

std::unique_ptr<Command> make_quantize_command() { return std::make_unique<QuantizeCommand>(); }

}  // namespace mo::app
