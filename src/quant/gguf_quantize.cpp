#include "mo/quant/gguf_quantize.h"

#include <fmt/format.h>

#include <cstring>
#include <string>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/formats/ggml_types.h"
#include "gguf_quantize_search.h"

namespace mo::quant {

namespace {

std::string type_label(std::uint32_t type) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  return info != nullptr ? fmt::format("ggml type {} ({})", type, info->name) : fmt::format("ggml type {}", type);
}

// ggml's ggml_fp32_to_fp16_row / ggml_fp32_to_bf16_row_ref: round to nearest even, NaN kept quiet.
template <std::uint16_t (*convert)(float)>
void convert_row(const float* src, void* dst, std::int64_t n) {
  auto* out = static_cast<std::uint8_t*>(dst);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t h = convert(src[i]);
    std::memcpy(out + 2 * i, &h, sizeof(h));
  }
}

}  // namespace

bool gguf_can_quantize(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return true;
    default: return false;
  }
}

void gguf_quantize_row(std::uint32_t type, const float* src, void* dst, std::int64_t n, const float* importance) {
  if (!gguf_can_quantize(type)) throw Error(fmt::format("cannot quantize to {}", type_label(type)));
  const std::uint32_t block = ggml_type_info(type)->block_size;
  if (n < 0 || n % block != 0) {
    throw Error(fmt::format("cannot quantize {} weights to {}: not a multiple of its block size {}", n, type_label(type), block));
  }
  using namespace detail;
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float)); return;
    case GgmlType::F16: convert_row<f32_to_f16>(src, dst, n); return;
    case GgmlType::BF16: convert_row<f32_to_bf16>(src, dst, n); return;
    case GgmlType::Q4_0: quantize_row_q4_0(src, dst, n, importance); return;
    case GgmlType::Q4_1: quantize_row_q4_1(src, dst, n, importance); return;
    case GgmlType::Q5_0: quantize_row_q5_0(src, dst, n, importance); return;
    case GgmlType::Q5_1: quantize_row_q5_1(src, dst, n, importance); return;
    case GgmlType::Q8_0: quantize_row_q8_0(src, dst, n); return;
    case GgmlType::Q2_K: quantize_row_q2_K(src, dst, n, importance); return;
    case GgmlType::Q3_K: quantize_row_q3_K(src, dst, n, importance); return;
    case GgmlType::Q4_K: quantize_row_q4_K(src, dst, n, importance); return;
    case GgmlType::Q5_K: quantize_row_q5_K(src, dst, n, importance); return;
    case GgmlType::Q6_K: quantize_row_q6_K(src, dst, n, importance); return;
    default: return;
  }
}

}  // namespace mo::quant
