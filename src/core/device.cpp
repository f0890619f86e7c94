#include "mo/core/device.h"

#include "mo/core/error.h"
#if MO_WITH_CUDA
#include "mo/core/device_cuda.h"
#endif

namespace mo {

bool cuda_built() { return MO_WITH_CUDA != 0; }

int cuda_device_count() {
#if MO_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

std::string cuda_summary() {
#if MO_WITH_CUDA
  int n = cuda::device_count();
  if (n == 0) return "on (built with CUDA; no GPU visible)";
  return "on (" + cuda::device_summary() + ")";
#else
  return "off (CPU build)";
#endif
}

const char* device_name(Device d) { return d == Device::cuda ? "cuda" : "cpu"; }

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::cpu;
  if (name == "auto") return cuda_device_count() > 0 ? Device::cuda : Device::cpu;
  if (name == "cuda") {
    if (!cuda_built()) throw UsageError("device 'cuda' requested, but this binary was built without CUDA (rebuild with -DMO_WITH_CUDA=ON)");
    if (cuda_device_count() == 0) throw UsageError("device 'cuda' requested, but no CUDA GPU is visible");
    return Device::cuda;
  }
  throw UsageError("device '" + std::string(name) + "' is not one of cpu, cuda, auto");
}

}  // namespace mo
