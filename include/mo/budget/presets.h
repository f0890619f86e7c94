#pragma once
// GPU memory sizes, so the calculator answers without a GPU; model shapes are mo/model/model_presets.h.
#include <string>
#include <vector>

namespace mo::budget {

struct GpuPreset {
  std::string name;   // as typed: "rtx4090"
  std::string label;  // "NVIDIA GeForce RTX 4090"
  double memory_mib;  // total memory as the CUDA driver reports it
};
const std::vector<GpuPreset>& gpu_presets();
const GpuPreset* find_gpu_preset(const std::string& name);
std::vector<std::string> gpu_preset_names();

}  // namespace mo::budget
