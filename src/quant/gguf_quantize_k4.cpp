// Q4_K and Q5_K encoders (32-weight sub-blocks with a scale and a min each): ggml-quants.c's
// quantize_row_<type>_ref, and with importance quantize_row_<type>_impl.
#include <cmath>
#include <cstring>

#include "mo/formats/gguf_blocks.h"
#include "mo/formats/k_scales.h"
#include "gguf_quantize_search.h"

namespace mo::quant::detail {

namespace {

// Q4_K/Q5_K scales[12]: sub-blocks 0-3 keep scale and min whole in bytes 0-3 and 4-7; sub-blocks 4-7
// keep their low nibbles in bytes 8-11 and their top two bits in the top bits of bytes 0-7. Values
// above 63 are not clamped here (ggml's Q4_K impl does not clamp either).
void pack_scales_k4(std::uint8_t* scales, int j, std::uint8_t ls, std::uint8_t lm) {
  if (j < 4) {
    scales[j] = ls;
    scales[j + 4] = lm;
  } else {
    scales[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
    scales[j - 4] = static_cast<std::uint8_t>(scales[j - 4] | ((ls >> 4) << 6));
    scales[j] = static_cast<std::uint8_t>(scales[j] | ((lm >> 4) << 6));
  }
}

// The reference quantizers' sub-block pass: weights av_x + |x| with av_x the sub-block's RMS, then
// 6-bit scales and mins against the largest of each.
void ref_scales(const float* x, int nmax, float rmin, float rdelta, int nstep, std::uint8_t* L, std::uint8_t* scales, std::uint16_t& d,
                std::uint16_t& dmin) {
  std::uint8_t Laux[32];
  float weights[32];
  float mins[formats::QK_K / 32];
  float sc[formats::QK_K / 32];
  float max_scale = 0;  // the min is subtracted, so scales are never negative
  float max_min = 0;
  for (int j = 0; j < formats::QK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    sc[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
    if (sc[j] > max_scale) max_scale = sc[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < formats::QK_K / 32; ++j) {
    // ggml narrows to uint8_t before clamping.
    const auto ls = static_cast<std::uint8_t>(nearest_int(inv_scale * sc[j]));
    const auto lm = static_cast<std::uint8_t>(nearest_int(inv_min * mins[j]));
    pack_scales_k4(scales, j, gmin<std::uint8_t>(63, ls), gmin<std::uint8_t>(63, lm));
  }
  d = fp16(max_scale / 63.f);
  dmin = fp16(max_min / 63.f);
}

// The importance pass: weights qw * sqrt(sigma2 + x^2) with sigma2 twice the super-block's mean
// square, the qkx3 search, then the scales and mins fitted by make_qp_quants.
void impl_scales(const float* x, const float* qw_block, int nmax, bool clamp_scales, std::uint8_t* L, std::uint8_t* scales,
                 std::uint16_t& d, std::uint16_t& dmin) {
  std::uint8_t Laux[32];
  std::uint8_t Ls[formats::QK_K / 32];
  std::uint8_t Lm[formats::QK_K / 32];
  float weights[32];
  float sw[formats::QK_K / 32];
  float mins[formats::QK_K / 32];
  float sc[formats::QK_K / 32];
  float sum_x2 = 0;
  for (int l = 0; l < formats::QK_K; ++l) sum_x2 += x[l] * x[l];
  const float sigma2 = 2 * sum_x2 / formats::QK_K;
  for (int j = 0; j < formats::QK_K / 32; ++j) {
    const float* qw = qw_block + 32 * j;
    for (int l = 0; l < 32; ++l) weights[l] = qw[l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
    float sumw = 0;
    for (int l = 0; l < 32; ++l) sumw += weights[l];
    sw[j] = sumw;
    sc[j] = make_qkx3_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
  }
  const float d_block = make_qp_quants(formats::QK_K / 32, 63, sc, Ls, sw);
  const float m_block = make_qp_quants(formats::QK_K / 32, 63, mins, Lm, sw);
  for (int j = 0; j < formats::QK_K / 32; ++j) {
    const std::uint8_t ls = clamp_scales ? gmin<std::uint8_t>(63, Ls[j]) : Ls[j];
    const std::uint8_t lm = clamp_scales ? gmin<std::uint8_t>(63, Lm[j]) : Lm[j];
    pack_scales_k4(scales, j, ls, lm);
  }
  d = fp16(d_block);
  dmin = fp16(m_block);
}

// Every weight re-rounded against the f16 scale and min it will be decoded with.
void requantize_k4(const float* x, int nmax, const std::uint8_t* scales, std::uint16_t d16, std::uint16_t dmin16, std::uint8_t* L) {
  for (int j = 0; j < formats::QK_K / 32; ++j) {
    std::uint8_t sc, m;
    formats::scale_min_k4(j, scales, sc, m);
    const float d = fp32(d16) * static_cast<float>(sc);
    if (d == 0.f) continue;
    const float dm = fp32(dmin16) * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      L[32 * j + ii] = static_cast<std::uint8_t>(gmax(0, gmin(nmax, nearest_int((x[32 * j + ii] + dm) / d))));
    }
  }
}

void pack_q4_K(const std::uint8_t* L, std::uint8_t* q) {
  for (int j = 0; j < formats::QK_K; j += 64, q += 32) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

// Low nibbles as Q4_K; the fifth bit of chunk c goes to bit 2c (weights l) and 2c+1 (l+32) of qh[l].
void pack_q5_K(const std::uint8_t* L, std::uint8_t* ql, std::uint8_t* qh) {
  std::memset(qh, 0, formats::QK_K / 8);
  std::uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < formats::QK_K; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] = static_cast<std::uint8_t>(qh[j] | m1);
      }
      int l2 = L[n + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        qh[j] = static_cast<std::uint8_t>(qh[j] | m2);
      }
      ql[j] = static_cast<std::uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<std::uint8_t>(m1 << 2);
    m2 = static_cast<std::uint8_t>(m2 << 2);
    ql += 32;
  }
}

}  // namespace

void quantize_row_q4_K(const float* x, void* dst, std::int64_t n, const float* importance) {
  std::uint8_t L[formats::QK_K];
  for (std::int64_t i = 0; i < n / formats::QK_K; ++i, x += formats::QK_K) {
    formats::BlockQ4_K y{};
    if (importance) {
      impl_scales(x, importance + formats::QK_K * i, 15, false, L, y.scales, y.d, y.dmin);
    } else {
      ref_scales(x, 15, -1.f, 0.1f, 20, L, y.scales, y.d, y.dmin);
    }
    requantize_k4(x, 15, y.scales, y.d, y.dmin, L);
    pack_q4_K(L, y.qs);
    store_block(dst, i, y);
  }
}

void quantize_row_q5_K(const float* x, void* dst, std::int64_t n, const float* importance) {
  std::uint8_t L[formats::QK_K];
  for (std::int64_t i = 0; i < n / formats::QK_K; ++i, x += formats::QK_K) {
    formats::BlockQ5_K y{};
    if (importance) {
      impl_scales(x, importance + formats::QK_K * i, 31, true, L, y.scales, y.d, y.dmin);
    } else {
      ref_scales(x, 31, -0.5f, 0.1f, 15, L, y.scales, y.d, y.dmin);
    }
    requantize_k4(x, 31, y.scales, y.d, y.dmin, L);
    pack_q5_K(L, y.qs, y.qh);
    store_block(dst, i, y);
  }
}

}  // namespace mo::quant::detail
