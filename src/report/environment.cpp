#include "environment.h"

#include <fmt/format.h>

#include <fstream>
#include <thread>

#include "mo/core/build_info.h"

namespace mo::report {

Environment environment() {
  Environment e;
  e.cpu = "unknown";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("model name")) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) e.cpu = line.substr(line.find_first_not_of(' ', colon + 1));
    break;
  }
  e.logical_cores = static_cast<int>(std::thread::hardware_concurrency());
  const auto& b = build_info();
  e.build = fmt::format("model-optimizer {} ({}), {}, {}", b.version, b.git_commit, b.build_type, b.compiler);
  return e;
}

}  // namespace mo::report
