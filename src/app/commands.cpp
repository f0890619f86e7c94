#include "mo/config/commands.h"

#include "cli.h"

namespace mo::app {

std::vector<std::unique_ptr<Command>> all_commands() {
  std::vector<std::unique_ptr<Command>> out;
  out.push_back(make_quantize_command());
  out.push_back(make_serve_command());
  out.push_back(make_bench_command());
  out.push_back(make_diagnose_command());
  out.push_back(make_budget_command());
  out.push_back(make_eval_command());
  out.push_back(make_generate_command());
  out.push_back(make_convert_command());
  out.push_back(make_inspect_command());
  return out;
}

}  // namespace mo::app
