#pragma once
// Built-in model shapes (from each model's published config.json), so the calculator and the dummy
// loaders answer without any file on disk.
#include <string>
#include <vector>

#include "mo/model/model_shape.h"

namespace mo::model {

struct ModelPreset {
  std::string name;           // as typed: "llama-2-7b"
  std::string hf_id;          // where the numbers come from
  double published_params_b;  // parameter count the model card states, billions
  Hparams hp;
};
const std::vector<ModelPreset>& model_presets();
const ModelPreset* find_model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

// A preset name, an HF config.json or model directory, or a .gguf file, as a ModelShape. Throws
// UsageError naming the argument when it is none of these.
ModelShape load_model_shape(const std::string& spec);

}  // namespace mo::model
