#pragma once
// What a linear layer can be stored as in the output format, and the nearest valid choice when the
// requested one does not fit its shape (formats.md: AWQ packs 8 outputs per int32 and keeps one group
// size for the whole model; GPTQ packs along the input and accepts per-module overrides).
#include <cstdint>
#include <string>

#include "mo/formats/quantized_linear.h"

namespace mo::quant {

// ct_packed (compressed-tensors pack-quantized) is planned as gptq and rewritten from it when finished.
enum class OutputLayout { awq_gemm, gptq, fp8, ct_packed };

struct LinearPlan {
  enum Kind { integer, fp8, f16 } kind = f16;
  formats::QuantScheme scheme;  // for integer
  std::string reason;           // empty when the request was taken as is
  std::string label() const;    // "int4 g64", "int8 per-channel", "fp8 per-channel", "f16"
};

// The requested scheme for a [rows, cols] linear, or its fallback: a smaller group that divides cols,
// per-channel, then (GPTQ layout) INT8, then f16. `bits` 16 asks for f16 directly.
LinearPlan plan_linear(OutputLayout layout, std::int64_t rows, std::int64_t cols, int bits, int group_size, bool sym, bool fp8_per_channel);

}  // namespace mo::quant
