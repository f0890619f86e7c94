#pragma once
#include <string>

#include "mo/convert/convert.h"
#include "mo/model/model_files.h"

namespace mo::convert {

// Writes `in` (a GGUF model) as an HF directory at `dir` (which must not exist yet).
void write_hf(const model::ModelFiles& in, const std::string& dir, const ConvertOptions& opt, ConvertReport& report);
// Writes `in` (an HF model) as a GGUF file at `path`.
void write_gguf(const model::ModelFiles& in, const std::string& path, const ConvertOptions& opt, ConvertReport& report);

}  // namespace mo::convert
