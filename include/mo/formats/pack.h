#pragma once
// The on-disk integer layouts of ../shared/design/formats.md: AWQ "GEMM" (AutoAWQ), GPTQ v1/v2
// (AutoGPTQ) and compressed-tensors pack-quantized. Packing is the writer's half; unpacking is what the engine loads them with.
#include <cstdint>
#include <vector>

#include "mo/formats/quantized_linear.h"

namespace mo::formats {

// AWQ GEMM, 4-bit: qweight int32 [in, out/8] (interleaved order 0,2,4,6,1,3,5,7 along out), qzeros
// int32 [in/G, out/8] (same order, true zeros), scales f16 [in/G, out]. Needs out % 8 == 0, in % G == 0.
struct AwqTensors {
  std::vector<std::int32_t> qweight, qzeros;
  std::vector<std::uint16_t> scales;
  std::int64_t in = 0, out = 0, group_size = 0;
};
AwqTensors pack_awq(const QuantizedLinear& q);
QuantizedLinear unpack_awq(const AwqTensors& t);

// GPTQ, 4 or 8 bits: qweight int32 [in*bits/32, out] packed along in; qzeros int32 [groups,
// out*bits/32] packed along out, storing zero-1 in v1 (the default) or the true zero in v2; scales
// f16 [groups, out]; g_idx int32 [in].
struct GptqTensors {
  std::vector<std::int32_t> qweight, qzeros, g_idx;
  std::vector<std::uint16_t> scales;
  std::int64_t in = 0, out = 0, groups = 0;
  int bits = 4;
};
GptqTensors pack_gptq(const QuantizedLinear& q, bool v1 = true);
QuantizedLinear unpack_gptq(const GptqTensors& t, int group_size, bool sym, bool v1 = true);

// compressed-tensors pack-quantized, 4 or 8 bits (compressors/quantized_compressors/pack_quantized.py):
// weight_packed int32 [out, ceil(in/pf)], pf = 32/bits codes per word along in, code j of a word in bits
// [bits*j, bits*(j+1)), each code the signed value plus 2^(bits-1); weight_scale f16 [out, groups];
// asymmetric only: weight_zero_point int32 [ceil(out/pf), groups], packed the same way along out
// (signed zero plus 2^(bits-1)); symmetric zeros are 0 (signed), i.e. 2^(bits-1) as our codes count.
// The unsigned codes and zeros are exactly ours, and GPTQ's words hold the same fields: weight_packed is
// GPTQ's qweight transposed, weight_zero_point GPTQ v2's qzeros transposed.
struct CtPackedTensors {
  std::vector<std::int32_t> weight_packed, weight_zero_point;  // zero point empty when symmetric
  std::vector<std::uint16_t> weight_scale;
  std::int64_t in = 0, out = 0, groups = 0;
  int bits = 4;
};
QuantizedLinear unpack_ct(const CtPackedTensors& t, int group_size, bool sym);

// Transposes a row-major [rows, cols] matrix of `elem`-byte elements (4: int32 words, 2: f16).
std::vector<std::uint8_t> transpose_elements(const std::uint8_t* data, std::int64_t rows, std::int64_t cols, std::size_t elem);

}  // namespace mo::formats
