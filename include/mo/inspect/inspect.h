#pragma once
// `model-optimizer inspect`: what a model is, in one screen (or JSON): architecture, parameters,
// bytes per type, quantization, tokenizer and chat template.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "mo/model/model_files.h"

namespace mo::inspect {

// Everything `inspect` reports, as JSON (the --json output).
nlohmann::json describe(const model::ModelFiles& m);
// The same for people.
std::string format_text(const nlohmann::json& d);

// The one-line summary of the model-optimizer.json manifest in a model directory we wrote (quantize:
// method, per-layer formats, calibration), or nothing when there is none.
std::optional<std::string> manifest_summary(const std::string& model_path);

// llama.cpp's general.file_type names (LLAMA_FTYPE_*), e.g. 15 -> "Q4_K_M".
std::string gguf_file_type_name(std::int64_t file_type);

}  // namespace mo::inspect
