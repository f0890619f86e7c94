// Portable fallback: decodes a few blocks at a time (mo::gguf's own dequantizer, so bit-exact) into a
// small stack buffer and dots them with each token in the 8-partial-sum order of dot_f32's scalar path.
#include <cstring>

#include "mo/core/half.h"
#include "mo/io/gguf_dequant.h"
#include "mo/formats/ggml_types.h"
#include "qdot.h"

namespace mo::ops::qdot {
namespace {

constexpr std::int64_t kChunk = 256;  // weights decoded at a time: one k-quant super-block, 8 small blocks

template <std::uint32_t Type>
void row_dot_chunked(const std::uint8_t* row, std::int64_t cols, const float* x, std::int64_t x_stride, int nt, float* y,
                     std::int64_t y_stride) {
  const GgmlTypeInfo* info = ggml_type_info(Type);
  const std::int64_t block = info->block_size;
  const std::int64_t chunk = block >= kChunk ? block : kChunk / block * block;
  const std::int64_t chunk_bytes = chunk / block * static_cast<std::int64_t>(info->type_size);
  float w[kChunk];
  float s[kMaxTokens][8] = {};
  float tail[kMaxTokens] = {};
  for (std::int64_t c0 = 0; c0 < cols; c0 += chunk, row += chunk_bytes) {
    const std::int64_t len = cols - c0 < chunk ? cols - c0 : chunk;
    gguf::dequantize_row(Type, row, w, len);
    std::int64_t i = 0;
    for (; i + 8 <= len; i += 8)
      for (int t = 0; t < nt; ++t)
        for (int j = 0; j < 8; ++j) s[t][j] += w[i + j] * x[t * x_stride + c0 + i + j];
    for (; i < len; ++i)
      for (int t = 0; t < nt; ++t) tail[t] += w[i] * x[t * x_stride + c0 + i];
  }
  for (int t = 0; t < nt; ++t)
    y[t * y_stride] = ((s[t][0] + s[t][4]) + (s[t][1] + s[t][5])) + ((s[t][2] + s[t][6]) + (s[t][3] + s[t][7])) + tail[t];
}

}  // namespace

RowDot row_dot_scalar(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
#define MO_QDOT_CASE(T) \
  case GgmlType::T: return row_dot_chunked<static_cast<std::uint32_t>(GgmlType::T)>;
    MO_QDOT_CASE(F32)
    MO_QDOT_CASE(F16)
    MO_QDOT_CASE(BF16)
    MO_QDOT_CASE(Q4_0)
    MO_QDOT_CASE(Q4_1)
    MO_QDOT_CASE(Q5_0)
    MO_QDOT_CASE(Q5_1)
    MO_QDOT_CASE(Q8_0)
    MO_QDOT_CASE(Q2_K)
    MO_QDOT_CASE(Q3_K)
    MO_QDOT_CASE(Q4_K)
    MO_QDOT_CASE(Q5_K)
    MO_QDOT_CASE(Q6_K)
#undef MO_QDOT_CASE
    default: return nullptr;
  }
}

RowDot row_dot(std::uint32_t type, SimdLevel level) {
  switch (level) {
    case SimdLevel::avx512: return row_dot_avx512(type);
    case SimdLevel::avx2: return row_dot_avx2(type);
    default: return row_dot_scalar(type);
  }
}

}  // namespace mo::ops::qdot
