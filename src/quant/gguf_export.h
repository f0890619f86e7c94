#pragma once
// `quantize --quant_method gguf`: a llama.cpp-compatible .gguf file from an HF directory or a GGUF
// model. Each tensor gets the ggml type llama.cpp's llama-quantize would pick for the file type
// (gguf_type) — its mixing rules, then the fallbacks for rows not divisible by the block — and is
// quantized with llama.cpp's encoders, weighted by an importance matrix (computed from calibration
// text, read from a file, or none). One tensor is decoded at a time; quantized tensors wait in a
// scratch file next to the output until the GGUF is written and renamed into place.
#include "mo/quant/options.h"
#include "mo/quant/quantize.h"

namespace mo::quant {

QuantizeReport quantize_gguf(const QuantizeOptions& cfg);

}  // namespace mo::quant
