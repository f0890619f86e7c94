// Finds and loads libmo_cuda.so: $MO_CUDA_PLUGIN, else beside the executable, in ../lib from it, or
// where this build put it.
#include "mo/core/cuda_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <system_error>
#include <vector>

#include <fmt/format.h>

namespace mo {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLibrary = "libmo_cuda.so";

std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("MO_CUDA_PLUGIN"); env && *env) return {env};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / kLibrary).string());
    out.push_back((exe.parent_path().parent_path() / "lib" / kLibrary).string());
  }
#ifdef MO_CUDA_PLUGIN_BUILD_PATH
  out.push_back(MO_CUDA_PLUGIN_BUILD_PATH);
#endif
  return out;
}

struct Loaded {
  const CudaPluginApi* api = nullptr;
  std::string why;
};

Loaded load() {
  if (!MO_WITH_CUDA) return {nullptr, "this binary was built without CUDA (rebuild with -DMO_WITH_CUDA=ON)"};
  std::string tried;
  for (const std::string& path : candidates()) {
    if (!fs::exists(path)) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return {nullptr, fmt::format("{}: {}", path, dlerror())};
    auto entry = reinterpret_cast<const CudaPluginApi* (*)()>(dlsym(h, "mo_cuda_plugin_api"));
    if (entry == nullptr) return {nullptr, fmt::format("{}: no mo_cuda_plugin_api symbol", path)};
    const CudaPluginApi* api = entry();
    if (api == nullptr || api->abi != kCudaPluginAbi)
      return {nullptr,
              fmt::format("{}: plugin ABI {} where this binary needs {} (rebuild both)", path, api ? api->abi : -1, kCudaPluginAbi)};
    return {api, ""};
  }
  return {nullptr, fmt::format("{} not found (looked at {}; MO_CUDA_PLUGIN names another path)", kLibrary, tried)};
}

}  // namespace

const CudaPluginApi* cuda_plugin(std::string* why) {
  static const Loaded loaded = load();
  if (why != nullptr) *why = loaded.why;
  return loaded.api;
}

bool nvidia_device_present() {
  std::error_code ec;
  // A container given one GPU may see /dev/nvidia3 alone; nvidiactl comes with any of them.
  if (fs::exists("/dev/nvidiactl", ec) || fs::exists("/dev/dxg", ec)) return true;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() > 6 && n.compare(0, 6, "nvidia") == 0 && n.find_first_not_of("0123456789", 6) == std::string::npos) return true;
  }
  return false;
}

}  // namespace mo
