#include <fmt/format.h>

#include "mo/core/build_info.h"
#include "mo/core/device.h"
#include "mo/core/simd.h"

namespace mo {

std::string version_text() {
  const BuildInfo& b = build_info();
  return fmt::format(
      "model-optimizer {}\n"
      "git commit: {}\n"
      "build type: {}\n"
      "compiler:   {}\n"
      "cuda:       {}\n"
      "simd:       {}; this cpu: {}\n",
      b.version, b.git_commit, b.build_type, b.compiler, cuda_summary(), simd_compiled(), simd_cpu());
}

}  // namespace mo
