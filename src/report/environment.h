#pragma once
// The machine and build a report was made on, for the Environment section.
#include <string>

namespace mo::report {

struct Environment {
  std::string cpu;  // /proc/cpuinfo "model name", or "unknown"
  int logical_cores = 0;
  std::string build;  // "model-optimizer 0.1.0 (abc1234), Release, GCC 12.2.0"
};

Environment environment();

}  // namespace mo::report
