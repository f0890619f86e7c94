#pragma once
// Built-in model shapes (from each model's published config.json) and GPU memory sizes, so the
// calculator answers without any file on disk.
#include <optional>
#include <string>
#include <vector>

#include "mo/model/model_shape.h"

namespace mo::budget {

struct ModelPreset {
  std::string name;            // as typed: "llama-2-7b"
  std::string hf_id;           // where the numbers come from
  double published_params_b;   // parameter count the model card states, billions
  model::Hparams hp;
};
const std::vector<ModelPreset>& model_presets();
const ModelPreset* find_model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

struct GpuPreset {
  std::string name;            // as typed: "rtx4090"
  std::string label;           // "NVIDIA GeForce RTX 4090"
  double memory_mib;           // total memory as the CUDA driver reports it
};
const std::vector<GpuPreset>& gpu_presets();
const GpuPreset* find_gpu_preset(const std::string& name);
std::vector<std::string> gpu_preset_names();

// A preset name, an HF config.json or model directory, or a .gguf file, as a ModelShape. Throws
// UsageError naming the argument when it is none of these.
model::ModelShape load_model_shape(const std::string& spec);

}  // namespace mo::budget
