#pragma once
#include <string>

namespace mo {

struct BuildInfo {
  std::string version;     // project version, e.g. "0.1.0"
  std::string git_commit;  // short hash at configure time, "unknown" outside a git checkout
  std::string build_type;  // CMake build type
  std::string compiler;    // compiler id and version
};

const BuildInfo& build_info();

// One block of text for `model-optimizer --version`.
std::string version_text();

}  // namespace mo
