// The plugin's export: the table src/core/cuda_plugin.cpp loads (see mo/core/cuda_plugin.h).
#include <memory>

#include "mo/core/cuda_plugin.h"
#include "mo/core/device_cuda.h"
#include "mo/engine/backend.h"

namespace mo::engine {
std::unique_ptr<Backend> cuda_plugin_backend(int ordinal);  // cuda_backend.cu
}  // namespace mo::engine

extern "C" __attribute__((visibility("default"))) const mo::CudaPluginApi* mo_cuda_plugin_api() {
  static const mo::CudaPluginApi api{mo::kCudaPluginAbi, &mo::cuda::device_count, &mo::cuda::device_summary,
                                     &mo::engine::cuda_plugin_backend};
  return &api;
}
