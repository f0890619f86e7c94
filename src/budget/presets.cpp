#include "mo/budget/presets.h"

#include <string>
#include <vector>

#include "mo/core/named_table.h"

namespace mo::budget {

const std::vector<GpuPreset>& gpu_presets() {
  static const std::vector<GpuPreset> gpus = {
      {"rtx3090", "NVIDIA GeForce RTX 3090 24 GB", 24576},
      {"rtx4090", "NVIDIA GeForce RTX 4090 24 GB", 24564},
      {"a10", "NVIDIA A10 24 GB", 23028},
      {"l4", "NVIDIA L4 24 GB", 23034},
      {"l40s", "NVIDIA L40S 48 GB", 46068},
      {"a100-40g", "NVIDIA A100 40 GB", 40960},
      {"a100-80g", "NVIDIA A100 80 GB", 81920},
      {"h100-80g", "NVIDIA H100 80 GB HBM3", 81559},
      {"h200", "NVIDIA H200 141 GB", 143771},
  };
  return gpus;
}

const GpuPreset* find_gpu_preset(const std::string& name) { return find_by_name(gpu_presets(), name); }
std::vector<std::string> gpu_preset_names() { return names_of(gpu_presets()); }

}  // namespace mo::budget
