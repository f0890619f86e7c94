#pragma once
// The command line: CLI11 subcommands whose options come from each command's config schema, so
// `--max-model-len 4096` and `max_model_len: 4096` in --config FILE set the same field.
#include <memory>
#include <string>
#include <vector>

#include "mo/config/schema.h"

namespace mo::app {

class Command {
 public:
  virtual ~Command() = default;
  virtual const char* name() const = 0;
  virtual const char* summary() const = 0;
  virtual void bind(config::Schema& schema) = 0;  // attach the config fields
  virtual int run() = 0;                          // after config file and flags are applied
};

std::vector<std::unique_ptr<Command>> all_commands();
std::unique_ptr<Command> make_bench_command();
std::unique_ptr<Command> make_budget_command();
std::unique_ptr<Command> make_convert_command();
std::unique_ptr<Command> make_diagnose_command();
std::unique_ptr<Command> make_eval_command();
std::unique_ptr<Command> make_generate_command();
std::unique_ptr<Command> make_inspect_command();
std::unique_ptr<Command> make_quantize_command();
std::unique_ptr<Command> make_serve_command();

// Parses argv, runs the chosen command and maps errors to exit codes (0 ok, 1 runtime, 2 usage).
int run_cli(int argc, char** argv);

}  // namespace mo::app
