// Q2_K, Q3_K and Q6_K encoders (16-weight sub-blocks): ggml-quants.c's quantize_row_<type>_ref, and
// with importance quantize_row_<type>_impl. The L arrays persist across a super-block's passes on
// purpose: a sub-block whose requantization scale rounds to zero keeps the codes of the first search,
// as in ggml.
#include <cmath>
#include <cstring>

#include "mo/formats/gguf_blocks.h"
#include "gguf_quantize_search.h"

namespace mo::quant::detail {

namespace {

// Four 2-bit codes per byte: within each 128 weights, byte l holds weights l, l+32, l+64, l+96.
void pack_2bit(const std::uint8_t* L, std::uint8_t* qs) {
  for (int j = 0; j < formats::QK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

// Q2_K's last pass: every weight re-rounded against the f16-rounded scales and mins it will be
// decoded with.
void requantize_q2_K(const float* x, const formats::BlockQ2_K& y, std::uint8_t* L) {
  const float dall = fp32(y.d);
  const float mall = fp32(y.dmin);
  for (int j = 0; j < formats::QK_K / 16; ++j) {
    const float d = dall * static_cast<float>(y.scales[j] & 0xF);
    if (d == 0.f) continue;
    const float dm = mall * static_cast<float>(y.scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) {
      L[16 * j + ii] = static_cast<std::uint8_t>(gmax(0, gmin(3, nearest_int((x[16 * j + ii] + dm) / d))));
    }
  }
}

void q2_K_ref(const float* x, formats::BlockQ2_K& y) {
  std::uint8_t L[formats::QK_K];
  std::uint8_t Laux[16];
  float weights[16];
  float mins[formats::QK_K / 16];
  float scales[formats::QK_K / 16];
  const float q4scale = 15.f;

  float max_scale = 0;  // the min is subtracted, so scales are never negative
  float max_min = 0;
  for (int j = 0; j < formats::QK_K / 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  if (max_scale > 0) {
    const float iscale = q4scale / max_scale;
    for (int j = 0; j < formats::QK_K / 16; ++j) y.scales[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
    y.d = fp16(max_scale / q4scale);
  } else {
    for (int j = 0; j < formats::QK_K / 16; ++j) y.scales[j] = 0;
    y.d = fp16(0.f);
  }
  if (max_min > 0) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < formats::QK_K / 16; ++j) {
      y.scales[j] = static_cast<std::uint8_t>(y.scales[j] | (nearest_int(iscale * mins[j]) << 4));
    }
    y.dmin = fp16(max_min / q4scale);
  } else {
    y.dmin = fp16(0.f);
  }
  requantize_q2_K(x, y, L);
  pack_2bit(L, y.qs);
}

void q2_K_impl(const float* x, formats::BlockQ2_K& y, const float* qw_block) {
  std::uint8_t L[formats::QK_K];
  std::uint8_t Laux[16];
  float mins[formats::QK_K / 16];
  float scales[formats::QK_K / 16];
  float sw[formats::QK_K / 16];
  float weight[16];
  std::uint8_t Ls[formats::QK_K / 16], Lm[formats::QK_K / 16];

  float sumx2 = 0;
  for (int j = 0; j < formats::QK_K; ++j) sumx2 += x[j] * x[j];
  const float sigma2 = sumx2 / formats::QK_K;
  for (int j = 0; j < formats::QK_K / 16; ++j) {
    const float* qw = qw_block + 16 * j;
    for (int l = 0; l < 16; ++l) weight[l] = qw[l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
    sw[j] = 0;
    for (int l = 0; l < 16; ++l) sw[j] += weight[l];
    scales[j] = make_qkx3_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
  }
  const float dm = make_qp_quants(formats::QK_K / 16, 15, scales, Ls, sw);
  const float mm = make_qp_quants(formats::QK_K / 16, 15, mins, Lm, sw);
  y.d = fp16(dm);
  y.dmin = fp16(mm);
  for (int j = 0; j < formats::QK_K / 16; ++j) y.scales[j] = static_cast<std::uint8_t>(Ls[j] | (Lm[j] << 4));
  requantize_q2_K(x, y, L);
  pack_2bit(L, y.qs);
}

// Q3_K's 16 six-bit scales: low nibbles in bytes 0-7 (sub-blocks j and j+8 share a byte), the high
// two bits in bytes 8-11.
void pack_q3_scale(std::uint8_t* scales, int j, int l) {
  if (j < 8) {
    scales[j] = static_cast<std::uint8_t>(l & 0xF);
  } else {
    scales[j - 8] = static_cast<std::uint8_t>(scales[j - 8] | ((l & 0xF) << 4));
  }
  l >>= 4;
  scales[j % 4 + 8] = static_cast<std::uint8_t>(scales[j % 4 + 8] | (l << (2 * (j / 4))));
}

// Shared tail of Q3_K's ref and impl: requantize against the stored scales, split off the high bit
// into hmask, pack the low two bits.
void finish_q3_K(const float* x, formats::BlockQ3_K& y, std::int8_t* L) {
  const float dall = fp32(y.d);
  for (int j = 0; j < formats::QK_K / 16; ++j) {
    std::int8_t sc = static_cast<std::int8_t>(j < 8 ? y.scales[j] & 0xF : y.scales[j - 8] >> 4);
    sc = static_cast<std::int8_t>((sc | (((y.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
    const float d = dall * static_cast<float>(sc);
    if (d == 0.f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      L[16 * j + ii] = static_cast<std::int8_t>(gmax(-4, gmin(3, nearest_int(x[16 * j + ii] / d))) + 4);
    }
  }
  // Byte m of hmask holds the high bit of weights m, m+32, ..., m+224 in bits 0..7.
  std::memset(y.hmask, 0, formats::QK_K / 8);
  int m = 0;
  std::uint8_t hm = 1;
  for (int j = 0; j < formats::QK_K; ++j) {
    if (L[j] > 3) {
      y.hmask[m] = static_cast<std::uint8_t>(y.hmask[m] | hm);
      L[j] = static_cast<std::int8_t>(L[j] - 4);
    }
    if (++m == formats::QK_K / 8) {
      m = 0;
      hm = static_cast<std::uint8_t>(hm << 1);
    }
  }
  pack_2bit(reinterpret_cast<const std::uint8_t*>(L), y.qs);
}

void q3_K_ref(const float* x, formats::BlockQ3_K& y) {
  std::int8_t L[formats::QK_K];
  float scales[formats::QK_K / 16];
  float max_scale = 0;
  float amax = 0;
  for (int j = 0; j < formats::QK_K / 16; ++j) {
    scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
    const float scale = std::fabs(scales[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = scales[j];
    }
  }
  std::memset(y.scales, 0, 12);
  if (max_scale != 0.f) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < formats::QK_K / 16; ++j) {
      // ggml narrows to int8_t before clamping.
      std::int8_t l = static_cast<std::int8_t>(nearest_int(iscale * scales[j]));
      l = static_cast<std::int8_t>(gmax(-32, gmin(31, static_cast<int>(l))) + 32);
      pack_q3_scale(y.scales, j, l);
    }
    y.d = fp16(1 / iscale);
  } else {
    y.d = fp16(0.f);
  }
  finish_q3_K(x, y, L);
}

void q3_K_impl(const float* x, formats::BlockQ3_K& y, const float* qw_block) {
  std::int8_t L[formats::QK_K];
  float scales[formats::QK_K / 16];
  float weight[16];
  float sw[formats::QK_K / 16];
  std::int8_t Ls[formats::QK_K / 16];

  float sumx2 = 0;
  for (int j = 0; j < formats::QK_K; ++j) sumx2 += x[j] * x[j];
  const float sigma2 = 2 * sumx2 / formats::QK_K;
  for (int j = 0; j < formats::QK_K / 16; ++j) {
    const float* qw = qw_block + 16 * j;
    for (int l = 0; l < 16; ++l) weight[l] = qw[l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
    float sumw = 0;
    for (int l = 0; l < 16; ++l) sumw += weight[l];
    sw[j] = sumw;
    scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weight);
  }
  std::memset(y.scales, 0, 12);
  const float d_block = make_qx_quants(formats::QK_K / 16, 32, scales, Ls, sw);
  for (int j = 0; j < formats::QK_K / 16; ++j) pack_q3_scale(y.scales, j, Ls[j]);
  y.d = fp16(d_block);
  finish_q3_K(x, y, L);
}

// qw_block null: the reference quantizer (weights x^2).
void q6_K(const float* x, formats::BlockQ6_K& y, const float* qw_block) {
  std::int8_t L[formats::QK_K];
  float scales[formats::QK_K / 16];
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int ib = 0; ib < formats::QK_K / 16; ++ib) {
    const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, qw_block ? qw_block + 16 * ib : nullptr);
    scales[ib] = scale;
    const float abs_scale = std::fabs(scale);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scale;
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&y, 0, sizeof(y));
    y.d = fp16(0.f);
    return;
  }
  const float iscale = -128.f / max_scale;
  y.d = fp16(1 / iscale);
  for (int ib = 0; ib < formats::QK_K / 16; ++ib) {
    y.scales[ib] = static_cast<std::int8_t>(gmin(127, nearest_int(iscale * scales[ib])));
  }
  const float dall = fp32(y.d);
  for (int j = 0; j < formats::QK_K / 16; ++j) {
    const float d = dall * static_cast<float>(y.scales[j]);
    if (d == 0.f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      L[16 * j + ii] = static_cast<std::int8_t>(gmax(-32, gmin(31, nearest_int(x[16 * j + ii] / d))) + 32);
    }
  }
  // Per 128 weights: ql holds the low nibbles of l and l+64 (bytes 0-31) and of l+32 and l+96
  // (bytes 32-63); qh holds the top two bits of l, l+32, l+64, l+96.
  std::uint8_t* ql = y.ql;
  std::uint8_t* qh = y.qh;
  for (int j = 0; j < formats::QK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l + 0] & 0xF;
      const int q2 = L[j + l + 32] & 0xF;
      const int q3 = L[j + l + 64] & 0xF;
      const int q4 = L[j + l + 96] & 0xF;
      ql[l + 0] = static_cast<std::uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<std::uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<std::uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                        ((L[j + l + 96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
}

}  // namespace

void quantize_row_q2_K(const float* x, void* dst, std::int64_t n, const float* importance) {
  for (std::int64_t i = 0; i < n / formats::QK_K; ++i, x += formats::QK_K) {
    formats::BlockQ2_K y{};
    if (importance) {
      q2_K_impl(x, y, importance + formats::QK_K * i);
    } else {
      q2_K_ref(x, y);
    }
    store_block(dst, i, y);
  }
}

void quantize_row_q3_K(const float* x, void* dst, std::int64_t n, const float* importance) {
  for (std::int64_t i = 0; i < n / formats::QK_K; ++i, x += formats::QK_K) {
    formats::BlockQ3_K y{};
    if (importance) {
      q3_K_impl(x, y, importance + formats::QK_K * i);
    } else {
      q3_K_ref(x, y);
    }
    store_block(dst, i, y);
  }
}

void quantize_row_q6_K(const float* x, void* dst, std::int64_t n, const float* importance) {
  for (std::int64_t i = 0; i < n / formats::QK_K; ++i, x += formats::QK_K) {
    formats::BlockQ6_K y{};
    q6_K(x, y, importance ? importance + formats::QK_K * i : nullptr);
    store_block(dst, i, y);
  }
}

}  // namespace mo::quant::detail
