// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 encoders: ggml-quants.c's quantize_row_<type>_ref, and with
// importance quantize_row_<type>_impl (Q8_0 has none).
#include <cfloat>
#include <cmath>
#include <cstring>

#include "mo/formats/gguf_blocks.h"
#include "gguf_quantize_search.h"

namespace mo::quant::detail {

namespace {

// The legacy types' importance weighting: the imatrix entry times sqrt(sigma2 + x^2), where sigma2
// is the mean square of the whole row (not of the block), so these encoders see the row as a unit.
float row_sigma2(const float* x, std::int64_t n) {
  float sum_x2 = 0;
  for (std::int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / static_cast<float>(n);
}

void block_weights(const float* xb, const float* qw, float sigma2, float* weight) {
  for (int j = 0; j < 32; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
}

// Bit 4 of each 5-bit code, weight j at bit j, as ggml packs qh.
template <typename Code>
void pack_q5(const Code* L, std::uint8_t* qs, std::uint8_t* qh_bytes) {
  std::uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const std::uint8_t xi0 = static_cast<std::uint8_t>(L[j]);
    const std::uint8_t xi1 = static_cast<std::uint8_t>(L[j + 16]);
    qs[j] = static_cast<std::uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
    qh |= ((xi0 & 0x10u) >> 4) << j;
    qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(qh_bytes, &qh, sizeof(qh));
}

// The signed max-magnitude element (the first one when several tie), which the symmetric types map
// to the most negative code.
float signed_absmax(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < 32; j++) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

}  // namespace

void quantize_row_q4_0(const float* x, void* dst, std::int64_t n, const float* importance) {
  const std::int64_t nb = n / formats::QK4_0;
  if (importance == nullptr) {
    for (std::int64_t i = 0; i < nb; ++i, x += formats::QK4_0) {
      formats::BlockQ4_0 y{};
      const float d = signed_absmax(x) / -8;
      const float id = d != 0.f ? 1.0f / d : 0.0f;
      y.d = fp16(d);
      for (int j = 0; j < formats::QK4_0 / 2; ++j) {
        const float x0 = x[j] * id;
        const float x1 = x[formats::QK4_0 / 2 + j] * id;
        // ggml truncates through int8_t; x * id lies in [-8, 8], so int truncation is the same.
        const std::uint8_t xi0 = static_cast<std::uint8_t>(gmin(15, static_cast<int>(x0 + 8.5f)));
        const std::uint8_t xi1 = static_cast<std::uint8_t>(gmin(15, static_cast<int>(x1 + 8.5f)));
        y.qs[j] = static_cast<std::uint8_t>(xi0 | (xi1 << 4));
      }
      store_block(dst, i, y);
    }
    return;
  }
  const float sigma2 = row_sigma2(x, n);
  float weight[formats::QK4_0];
  std::int8_t L[formats::QK4_0];
  for (std::int64_t ib = 0; ib < nb; ++ib) {
    const float* xb = x + formats::QK4_0 * ib;
    block_weights(xb, importance + formats::QK4_0 * ib, sigma2, weight);
    formats::BlockQ4_0 y{};
    y.d = fp16(make_qx_quants(formats::QK4_0, 8, xb, L, weight));
    for (int j = 0; j < 16; ++j) y.qs[j] = static_cast<std::uint8_t>(L[j] | (L[j + 16] << 4));
    store_block(dst, ib, y);
  }
}

void quantize_row_q4_1(const float* x, void* dst, std::int64_t n, const float* importance) {
  const std::int64_t nb = n / formats::QK4_1;
  if (importance == nullptr) {
    for (std::int64_t i = 0; i < nb; ++i, x += formats::QK4_1) {
      float min = FLT_MAX;
      float max = -FLT_MAX;
      for (int j = 0; j < formats::QK4_1; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
      }
      const float d = (max - min) / 15;
      const float id = d != 0.f ? 1.0f / d : 0.0f;
      formats::BlockQ4_1 y{};
      y.d = fp16(d);
      y.m = fp16(min);
      for (int j = 0; j < formats::QK4_1 / 2; ++j) {
        const float x0 = (x[j] - min) * id;
        const float x1 = (x[formats::QK4_1 / 2 + j] - min) * id;
        const std::uint8_t xi0 = static_cast<std::uint8_t>(gmin(15, static_cast<int>(x0 + 0.5f)));
        const std::uint8_t xi1 = static_cast<std::uint8_t>(gmin(15, static_cast<int>(x1 + 0.5f)));
        y.qs[j] = static_cast<std::uint8_t>(xi0 | (xi1 << 4));
      }
      store_block(dst, i, y);
    }
    return;
  }
  const float sigma2 = row_sigma2(x, n);
  float weight[formats::QK4_1];
  std::uint8_t L[formats::QK4_1], Laux[formats::QK4_1];
  for (std::int64_t ib = 0; ib < nb; ++ib) {
    const float* xb = x + formats::QK4_1 * ib;
    block_weights(xb, importance + formats::QK4_1 * ib, sigma2, weight);
    float min;
    const float d = make_qkx3_quants(formats::QK4_1, 15, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
    formats::BlockQ4_1 y{};
    y.d = fp16(d);
    y.m = fp16(-min);
    for (int j = 0; j < 16; ++j) y.qs[j] = static_cast<std::uint8_t>(L[j] | (L[j + 16] << 4));
    store_block(dst, ib, y);
  }
}

void quantize_row_q5_0(const float* x, void* dst, std::int64_t n, const float* importance) {
  const std::int64_t nb = n / formats::QK5_0;
  if (importance == nullptr) {
    std::uint8_t L[formats::QK5_0];
    for (std::int64_t i = 0; i < nb; ++i, x += formats::QK5_0) {
      const float d = signed_absmax(x) / -16;
      const float id = d != 0.f ? 1.0f / d : 0.0f;
      for (int j = 0; j < formats::QK5_0; ++j) {
        L[j] = static_cast<std::uint8_t>(gmin(31, static_cast<int>(x[j] * id + 16.5f)));
      }
      formats::BlockQ5_0 y{};
      y.d = fp16(d);
      pack_q5(L, y.qs, y.qh);
      store_block(dst, i, y);
    }
    return;
  }
  const float sigma2 = row_sigma2(x, n);
  float weight[formats::QK5_0];
  std::int8_t L[formats::QK5_0];
  for (std::int64_t ib = 0; ib < nb; ++ib) {
    const float* xb = x + formats::QK5_0 * ib;
    block_weights(xb, importance + formats::QK5_0 * ib, sigma2, weight);
    formats::BlockQ5_0 y{};
    y.d = fp16(make_qx_quants(formats::QK5_0, 16, xb, L, weight));
    pack_q5(L, y.qs, y.qh);
    store_block(dst, ib, y);
  }
}

void quantize_row_q5_1(const float* x, void* dst, std::int64_t n, const float* importance) {
  const std::int64_t nb = n / formats::QK5_1;
  std::uint8_t L[formats::QK5_1];
  if (importance == nullptr) {
    for (std::int64_t i = 0; i < nb; ++i, x += formats::QK5_1) {
      float min = FLT_MAX;
      float max = -FLT_MAX;
      for (int j = 0; j < formats::QK5_1; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
      }
      const float d = (max - min) / 31;
      const float id = d != 0.f ? 1.0f / d : 0.0f;
      // No clamp, as in ggml: (x - min) * id never exceeds 31 + 1/2 by enough to truncate to 32.
      for (int j = 0; j < formats::QK5_1; ++j) L[j] = static_cast<std::uint8_t>((x[j] - min) * id + 0.5f);
      formats::BlockQ5_1 y{};
      y.d = fp16(d);
      y.m = fp16(min);
      pack_q5(L, y.qs, y.qh);
      store_block(dst, i, y);
    }
    return;
  }
  const float sigma2 = row_sigma2(x, n);
  float weight[formats::QK5_1];
  std::uint8_t Laux[formats::QK5_1];
  for (std::int64_t ib = 0; ib < nb; ++ib) {
    const float* xb = x + formats::QK5_1 * ib;
    block_weights(xb, importance + formats::QK5_1 * ib, sigma2, weight);
    float min;
    const float d = make_qkx3_quants(formats::QK5_1, 31, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
    formats::BlockQ5_1 y{};
    y.d = fp16(d);
    y.m = fp16(-min);
    pack_q5(L, y.qs, y.qh);
    store_block(dst, ib, y);
  }
}

void quantize_row_q8_0(const float* x, void* dst, std::int64_t n) {
  const std::int64_t nb = n / formats::QK8_0;
  for (std::int64_t i = 0; i < nb; ++i, x += formats::QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < formats::QK8_0; j++) amax = gmax(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    formats::BlockQ8_0 y{};
    y.d = fp16(d);
    for (int j = 0; j < formats::QK8_0; ++j) y.qs[j] = static_cast<std::int8_t>(std::round(x[j] * id));
    store_block(dst, i, y);
  }
}

}  // namespace mo::quant::detail
