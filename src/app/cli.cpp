#include "cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <map>

#include "mo/config/yaml_loader.h"
#include "mo/core/build_info.h"
#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/core/strings.h"

namespace mo::app {
namespace {

constexpr const char* kExitCodes =
    "Exit codes: 0 ok, 1 runtime failure (corrupt file, CUDA error), 2 usage or config error.\n"
    "Environment: MO_LOG_LEVEL sets the log level (--log-level wins).";

// Raw flag values of one subcommand, applied to the schema after the config file.
struct FlagBinding {
  const config::Field* field;
  CLI::Option* option;
  CLI::Option* negation = nullptr;  // --no-<key> for booleans
};

struct Subcommand {
  std::unique_ptr<Command> command;
  std::unique_ptr<config::Schema> schema;
  CLI::App* app = nullptr;
  std::string config_path;
  bool print_config = false;
  std::vector<FlagBinding> flags;
  std::vector<std::string> option_names;  // for "did you mean"
};

std::string option_names_for(const std::string& key, std::vector<std::string>& all) {
  std::vector<std::string> names;
  auto push = [&](const std::string& n) {
    if (std::find(names.begin(), names.end(), "--" + n) == names.end()) names.push_back("--" + n);
  };
  push(key);
  push(config::dashed(key));
  for (const auto& n : names) all.push_back(n);
  return join(names, ",");
}

void bind_flags(Subcommand& sc) {
  for (const auto& f : sc.schema->fields()) {
    std::string names = option_names_for(f.key, sc.option_names);
    for (const auto& a : f.aliases) names += "," + option_names_for(a, sc.option_names);
    if (f.positional) names += "," + f.key;  // CLI11: a name without dashes is positional
    std::string help = f.help;
    if (!f.choices.empty())
      help += " (" + join(f.choices, "|") + ")";
    else if (f.min || f.max)
      help += " (" + f.expected() + ")";
    FlagBinding b{&f, nullptr};
    if (f.kind == config::FieldKind::boolean) {
      // --json alone means true; --json=false and --no-json also work.
      b.option = sc.app->add_flag(names)->description(help);
      b.option->disable_flag_override(false);
      std::string neg = "--no-" + f.key;
      if (neg != "--no-" + config::dashed(f.key)) neg += ",--no-" + config::dashed(f.key);
      b.negation = sc.app->add_flag(neg)->description("set " + f.key + " to false")->group("");
      sc.option_names.push_back("--no-" + config::dashed(f.key));
    } else {
      b.option = sc.app->add_option(names)->description(help);
      b.option->type_name(f.value_name.empty() ? (f.kind == config::FieldKind::integer       ? "INT"
                                                  : f.kind == config::FieldKind::number      ? "NUM"
                                                  : f.kind == config::FieldKind::string_list ? "LIST"
                                                                                             : "TEXT")
                                               : f.value_name);
      if (!f.default_text.empty()) b.option->default_str(f.default_text);
      if (f.kind == config::FieldKind::string_list) b.option->expected(1, 1 << 16);
    }
    b.option->group("Options (YAML key = flag name with '_')");
    sc.flags.push_back(b);
  }
}

void apply_flags(const Subcommand& sc) {
  for (const auto& b : sc.flags) {
    const std::string where = "flag " + b.option->get_name();
    if (b.negation && b.negation->count() > 0) {
      config::Schema::set_from_text(*b.field, "false", where);
      continue;
    }
    if (b.option->count() == 0) continue;
    std::vector<std::string> values = b.option->results();
    if (b.field->kind == config::FieldKind::boolean) {
      config::Schema::set_from_text(*b.field, values.empty() ? "true" : values.back(), where);
    } else if (b.field->kind == config::FieldKind::string_list) {
      config::Schema::set_from_text(*b.field, join(values, ","), where);
    } else {
      config::Schema::set_from_text(*b.field, values.back(), where);
    }
  }
}

[[noreturn]] void unknown_arguments(const Subcommand& sc, const std::vector<std::string>& extras) {
  std::string first = extras.front();
  for (const auto& e : extras) {
    if (e.rfind("-", 0) == 0) {
      first = e;
      break;
    }
  }
  std::string msg = fmt::format("{}: unknown argument '{}'", sc.command->name(), first);
  std::string flag = first.substr(0, first.find('='));
  if (flag.rfind("--", 0) == 0) {
    if (auto near = closest_match(flag, sc.option_names)) {
      // Answer in the user's spelling: dashes for dashes, underscores for underscores.
      bool dashes = flag.find('-', 2) != std::string::npos && flag.find('_') == std::string::npos;
      msg += fmt::format(" (did you mean '{}'?)", dashes ? "--" + config::dashed(near->substr(2)) : *near);
    }
  }
  throw UsageError(msg + fmt::format("; see model-optimizer {} --help", sc.command->name()));
}

int run_command(Subcommand& sc, std::vector<std::string> extras) {
  if (!extras.empty()) unknown_arguments(sc, extras);
  if (!sc.config_path.empty()) config::load_yaml_file(*sc.schema, sc.config_path);
  apply_flags(sc);
  if (sc.print_config) {
    std::cout << sc.schema->to_yaml();
    return kExitOk;
  }
  return sc.command->run();
}

int parse_and_run(int argc, char** argv) {
  CLI::App app{"model-optimizer — quantize, serve, benchmark and diagnose open LLMs, with numbers to show for it"};
  app.footer(kExitCodes);
  app.set_version_flag(
      "--version", [] { return version_text(); }, "print version, git commit, build type, CUDA and SIMD");
  std::string log_level;
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")->type_name("LEVEL");
  app.fallthrough();
  app.require_subcommand(0, 1);
  app.allow_extras();  // unknown flags are reported by us, with a "did you mean"

  std::vector<Subcommand> subs;
  for (auto& cmd : all_commands()) {
    Subcommand sc;
    sc.schema = std::make_unique<config::Schema>(cmd->name());
    cmd->bind(*sc.schema);
    sc.app = app.add_subcommand(cmd->name(), cmd->summary());
    sc.app->footer(kExitCodes);
    sc.app->allow_extras();
    sc.command = std::move(cmd);
    subs.push_back(std::move(sc));
  }
  for (auto& sc : subs) {
    sc.app->add_option("--config", sc.config_path, "YAML file with keys of the options below; flags override it")->type_name("FILE");
    sc.app->add_flag("--print-config", sc.print_config, "print the merged configuration as YAML and exit");
    sc.option_names.insert(sc.option_names.end(), {"--config", "--print-config", "--help", "--log-level"});
    bind_flags(sc);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the usage error itself; every parse error is a usage error.
    app.exit(e);
    return kExitUsage;
  }
  log::init(log_level);
  for (auto& sc : subs)
    if (sc.app->parsed()) return run_command(sc, app.remaining(true));
  if (!app.remaining().empty()) throw UsageError("unknown argument '" + app.remaining().front() + "'; see model-optimizer --help");
  std::cerr << app.help();
  return kExitUsage;
}

}  // namespace

int run_cli(int argc, char** argv) {
  try {
    return parse_and_run(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitRuntime;
  }
}

}  // namespace mo::app
