#include "mo/core/device.h"

#include "mo/core/error.h"
#include "mo/core/cuda_plugin.h"

namespace mo {

bool cuda_built() { return MO_WITH_CUDA != 0; }

// Without an NVIDIA device node the plugin (and the CUDA libraries) is never loaded.
int cuda_device_count() {
  if (!cuda_built() || !nvidia_device_present()) return 0;
  const CudaPluginApi* api = cuda_plugin();
  return api ? api->device_count() : 0;
}

std::string cuda_summary() {
  if (!cuda_built()) return "off (CPU build)";
  if (!nvidia_device_present()) return "on (built with CUDA; no GPU visible)";
  std::string why;
  const CudaPluginApi* api = cuda_plugin(&why);
  if (api == nullptr) return "on (built with CUDA; backend not loaded: " + why + ")";
  if (api->device_count() == 0) return "on (built with CUDA; no GPU visible)";
  return "on (" + api->device_summary() + ")";
}

const char* device_name(Device d) { return d == Device::cuda ? "cuda" : "cpu"; }

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::cpu;
  if (name == "auto") return cuda_device_count() > 0 ? Device::cuda : Device::cpu;
  if (name == "cuda") {
    if (!cuda_built()) throw UsageError("device 'cuda' requested, but this binary was built without CUDA (rebuild with -DMO_WITH_CUDA=ON)");
    // Asked for by name: load the backend even without a device node, so a broken install says why.
    std::string why;
    const CudaPluginApi* api = cuda_plugin(&why);
    if (api == nullptr) throw UsageError("device 'cuda' requested, but the CUDA backend could not be loaded: " + why);
    if (api->device_count() == 0) throw UsageError("device 'cuda' requested, but no CUDA GPU is visible");
    return Device::cuda;
  }
  throw UsageError("device '" + std::string(name) + "' is not one of cpu, cuda, auto");
}

}  // namespace mo
