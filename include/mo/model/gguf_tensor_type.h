#pragma once
// llama.cpp's per-tensor GGUF type choice (mo/formats/gguf_file_types.h) for a model's tensor.
#include <cstdint>
#include <string>

#include "mo/model/model_shape.h"

namespace mo::model {

// The ggml type llama.cpp's quantizer (llama_tensor_get_type) picks for `t` under GGUF file type
// `format`, including its mixing rules and the fallbacks for row lengths not divisible by the block.
std::uint32_t gguf_tensor_type(const std::string& format, const WeightTensor& t, const Hparams& hp, bool has_imatrix = false);

}  // namespace mo::model
