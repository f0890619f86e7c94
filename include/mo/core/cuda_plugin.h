#pragma once
// The CUDA backend is a plugin, libmo_cuda.so, loaded on first use: a run on the CPU never maps the CUDA
// libraries (cuBLAS alone adds ~60 MB of resident relocations, cudart's start-up more), as llama.cpp's
// dynamically loaded backends. The plugin and the core library share this table, nothing else.
#include <memory>
#include <string>

namespace mo::engine {
class Backend;
}

namespace mo {

inline constexpr int kCudaPluginAbi = 1;  // bumped whenever CudaPluginApi changes

struct CudaPluginApi {
  int abi;
  int (*device_count)();                                          // 0 without a driver or a GPU (never throws)
  std::string (*device_summary)();                                // names and memory of the visible devices
  std::unique_ptr<engine::Backend> (*make_backend)(int ordinal);  // throws UsageError for a missing GPU
};

// The loaded plugin, or nullptr with *why saying what failed (a CPU build, the library not found,
// an ABI mismatch). Loaded once; never unloaded.
const CudaPluginApi* cuda_plugin(std::string* why = nullptr);

// True when the kernel exposes an NVIDIA device (/dev/nvidia0.., or /dev/dxg under WSL2). Without one
// the device queries answer 0 without loading the plugin.
bool nvidia_device_present();

}  // namespace mo

// The plugin's one export.
extern "C" const mo::CudaPluginApi* mo_cuda_plugin_api();
