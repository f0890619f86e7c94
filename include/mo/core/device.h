#pragma once
#include <string>
#include <string_view>

namespace mo {

enum class Device { cpu, cuda };

// Parses "cpu", "cuda" or "auto" (cuda when built with it and a GPU is present, else cpu).
// Throws UsageError for other names, and for "cuda" in a build without CUDA or with no GPU.
Device parse_device(std::string_view name);
const char* device_name(Device d);

// True when this binary was built with MO_WITH_CUDA.
bool cuda_built();
// Number of CUDA devices visible at run time (0 in a CPU build or without a GPU).
int cuda_device_count();
// One line for --version and start-up logs: "cuda: on (1 device: NVIDIA H200, 139.8 GiB)" and the like.
std::string cuda_summary();

}  // namespace mo
