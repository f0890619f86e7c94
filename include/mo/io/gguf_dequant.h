#pragma once
// GGUF tensor data -> f32, bit-identical to llama.cpp's dequantize_row_* (ggml-quants.c) and to
// gguf-py's gguf.quants.dequantize: each weight is computed with the same float operations in the
// same order, without fused multiply-add.
#include <cstdint>
#include <vector>

#include "mo/io/gguf.h"

namespace mo::gguf {

// True for the types dequantize_row accepts: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K.
bool can_dequantize(std::uint32_t ggml_type);

// Decodes `n` consecutive weights stored at `src` (ggml_row_bytes(type, n) bytes, any alignment)
// into dst[0, n). Throws Error for other types, for negative `n` and for `n` not a multiple of the
// type's block size.
void dequantize_row(std::uint32_t ggml_type, const void* src, float* dst, std::int64_t n);

// The whole tensor as f32, n_elements() values in file order (ne[0] fastest). Throws Error naming the
// file and tensor when its type cannot be dequantized or its bytes are not in the file.
std::vector<float> dequantize(const File& file, const TensorInfo& tensor);

}  // namespace mo::gguf
