#pragma once
// f32 -> GGUF blocks, byte for byte as llama.cpp's ggml-quants.c (ggml 0.20: quantize_q4_0 ...
// quantize_q6_K, i.e. what ggml_quantize_chunk and llama-quantize write). Without importance every
// type uses llama.cpp's reference quantizer (quantize_row_<type>_ref); with importance the legacy
// types and the k-quants use the weighted search (quantize_row_<type>_impl). Q8_0 ignores importance,
// as llama.cpp does. The arithmetic is ggml's, operation for operation, without fused multiply-add,
// so the bytes do not depend on the compiler or the host's SIMD level.
#include <cstdint>

namespace mo::quant {

// Quantizes one row of `n` floats (n a multiple of the type's block size) into ggml type `type`,
// writing ggml_row_bytes(type, n) bytes to `dst` (any alignment).
// importance: null, or n per-column weights (an importance-matrix row: mean of x^2 per input column
// over calibration tokens) that weight the scale search. With importance the row is the unit ggml
// quantizes: the legacy types take the row's mean square as a prior, so quantizing a matrix means one
// call per row, each with the same importance. Without importance the result is the same whatever
// the row length (blocks are independent).
// Types: F32, F16, BF16 (rounded to nearest even), Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K. Throws mo::Error for any other type, a negative `n` or one not a multiple of the block
// size.
void gguf_quantize_row(std::uint32_t type, const float* src, void* dst, std::int64_t n, const float* importance = nullptr);

// True for the types gguf_quantize_row accepts.
bool gguf_can_quantize(std::uint32_t type);

}  // namespace mo::quant
