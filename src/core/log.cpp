#include "mo/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

#include "mo/core/error.h"

namespace mo::log {

void init(const std::string& level) {
  std::string name = level;
  if (name.empty()) {
    const char* env = std::getenv("MO_LOG_LEVEL");
    name = env && *env ? env : "info";
  }
  auto lvl = spdlog::level::from_str(name);
  // from_str maps unknown names to "off"; only accept "off" when it was asked for.
  if (lvl == spdlog::level::off && name != "off") {
    throw UsageError("log level '" + name + "' is not one of trace, debug, info, warn, error, off");
  }
  static auto logger = [] {
    auto l = spdlog::stderr_color_mt("model-optimizer");
    l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    return l;
  }();
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
}

}  // namespace mo::log
