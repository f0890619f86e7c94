#include <iostream>

#include "cli.h"
#include "mo/budget/budget.h"
#include "mo/budget/budget_config.h"
#include "mo/budget/printer.h"
#include "mo/core/error.h"

namespace mo::app {
namespace {

class BudgetCommand : public Command {
 public:
  const char* name() const override { return "budget"; }
  const char* summary() const override {
    return "VRAM calculator: weights + KV cache + activations vs a GPU, with the largest max_model_len that fits";
  }
  void bind(config::Schema& s) override { budget::bind(s, cfg_); }
  int run() override {
    budget::BudgetRequest req = budget::make_request(cfg_);
    if (cfg_.compare_formats) {
      if (cfg_.json)
        std::cout << budget::comparison_json(req).dump(2) << "\n";
      else
        std::cout << budget::format_comparison(req);
      return kExitOk;
    }
    budget::BudgetResult res = budget::compute_budget(req);
    if (cfg_.json)
      std::cout << budget::to_json(req, res).dump(2) << "\n";
    else
      std::cout << budget::format_table(req, res);
    return kExitOk;
  }

 private:
  budget::BudgetConfig cfg_;
};

}  // namespace

std::unique_ptr<Command> make_budget_command() { return std::make_unique<BudgetCommand>(); }

}  // namespace mo::app
