#pragma once
// Builds a ModelShape from the places a user can point at: an HF config.json (or the model
// directory holding it) or a GGUF file.
#include <string>

#include <nlohmann/json.hpp>

#include "mo/model/model_shape.h"

namespace mo::gguf {
struct File;
}

namespace mo::model {

// The architectures this release understands, for error messages.
const char* supported_architectures();

// From a parsed config.json; `source` names the file in errors.
ModelShape shape_from_hf_config(const nlohmann::json& config, const std::string& source);
// From a config.json path or a directory that holds one.
ModelShape shape_from_hf_path(const std::string& path);
// From GGUF metadata; tensors and their stored types come from the file's tensor table.
ModelShape shape_from_gguf(const gguf::File& file);

}  // namespace mo::model
