#pragma once
#include <cstdint>
#include <vector>

#include "mo/model/model_files.h"
#include "mo/formats/ggml_types.h"

namespace mo::convert {

std::size_t float_type_size(std::uint32_t type);
const char* torch_dtype_name(std::uint32_t type);  // "float32", "float16", "bfloat16"
// "f32" | "f16" | "bf16" -> ggml type id
std::uint32_t float_type_from_name(const std::string& name);

// The tensor's elements in float type `target`: the stored bytes when already in it (bit-exact),
// else decoded to f32 (dequantized for block types) and rounded to nearest even.
std::vector<std::uint8_t> to_float_type(const model::StoredTensor& t, std::uint32_t target);

}  // namespace mo::convert
