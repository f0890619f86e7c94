#pragma once
// Turns a finished GPTQ-layout output directory into compressed-tensors pack-quantized, tensor by tensor:
// the two formats hold the same codes, zeros and f16 scales in the same 32-bit words, transposed (see
// mo/formats/pack.h), so the rewrite is exact and needs only one shard in memory. Used when the sensitivity
// check, skip_layers or a shape fallback gave the linears different precisions: GPTQ can say so only
// with GPTQModel's `dynamic` rules, which Transformers' GPTQ loader ignores.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mo/quant/quantize.h"

namespace mo::quant {

struct CtRewrite {
  std::map<std::string, std::int64_t> bytes_change;  // per quantized module: stored bytes now minus before
  std::uint64_t total_bytes = 0;                     // all tensor data in the directory
};

// Per quantized module <m> (bits, group and sym from its decision): <m>.qweight -> <m>.weight_packed and
// <m>.weight_shape, <m>.scales -> <m>.weight_scale, <m>.qzeros -> <m>.weight_zero_point (asymmetric,
// where the GPTQ output holds v2 true zeros) or dropped (symmetric), <m>.g_idx dropped (Error unless it
// is i / group_size: pack-quantized without actorder has no g_idx). Rewrites model.safetensors.index.json.
CtRewrite rewrite_gptq_as_compressed_tensors(const std::string& dir, const std::vector<LinearDecision>& decisions);

}  // namespace mo::quant
