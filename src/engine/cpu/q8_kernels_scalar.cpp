// Portable integer-dot kernels: each 32-weight block is decoded to unsigned integers u with
// w = dw[h] * (u - off) - mn[h] for the two 16-weight halves h (exactly the weights dequantize_row
// gives), dotted with a BlockQ8 in int32, and scaled once per half. Every (row, token) runs the same
// operations whatever the tile, so the result never depends on nr or nt.
#include <cmath>
#include <cstring>

#include "mo/core/half.h"
#include "mo/formats/ggml_types.h"
#include "mo/formats/gguf_blocks.h"
#include "mo/formats/k_scales.h"
#include "q8_kernels.h"

namespace mo::ops::q8 {
namespace {

using namespace mo::formats;

struct Decoded {
  std::uint8_t u[kBlock];
  int off = 0;
  float dw[2] = {0, 0};
  float mn[2] = {0, 0};
  bool has_min = false;
};

float half_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

template <class B>
B load(const std::uint8_t* p) {
  B b;
  std::memcpy(&b, p, sizeof(B));
  return b;
}

// 4-bit (+ optional fifth bit from qh) legacy blocks.
void nibbles(const std::uint8_t* qs, std::uint32_t qh, bool five, Decoded& o) {
  for (int l = 0; l < 16; ++l) {
    o.u[l] = static_cast<std::uint8_t>((qs[l] & 0xF) | (five ? ((qh >> l) & 1) << 4 : 0));
    o.u[l + 16] = static_cast<std::uint8_t>((qs[l] >> 4) | (five ? ((qh >> (l + 16)) & 1) << 4 : 0));
  }
}

void dec_q4_0(const std::uint8_t* row, std::int64_t b, Decoded& o) {
  const auto k = load<formats::BlockQ4_0>(row + b * sizeof(formats::BlockQ4_0));
  nibbles(k.qs, 0, false, o);
  o.off = 8;
  o.dw[0] = o.dw[1] = f16_to_f32(k.d);
}
void dec_q4_1(const std::uint8_t* row, std::int64_t b, Decoded& o) {
  const auto k = load<formats::BlockQ4_1>(row + b * sizeof(formats::BlockQ4_1));
  nibbles(k.qs, 0, false, o);
  o.dw[0] = o.dw[1] = f16_to_f32(k.d);
  o.mn[0] = o.mn[1] = -f16_to_f32(k.m);
  o.has_min = true;
}
void dec_q5_0(const std::uint8_t* row, std::int64_t b, Decoded& o) {
  const auto k = load<formats::BlockQ5_0>(row + b * sizeof(formats::BlockQ5_0));
  std::uint32_t qh;
  std::memcpy(&qh, k.qh, 4);
  nibbles(k.qs, qh, true, o);
  o.off = 16;
  o.dw[0] = o.dw[1] = f16_to_f32(k.d);
}
void dec_q5_1(const std::uint8_t* row, std::int64_t b, Decoded& o) {
  const auto k = load<formats::BlockQ5_1>(row + b * sizeof(formats::BlockQ5_1));
  std::uint32_t qh;
  std::memcpy(&qh, k.qh, 4);
  nibbles(k.qs, qh, true, o);
  o.dw[0] = o.dw[1] = f16_to_f32(k.d);
  o.mn[0] = o.mn[1] = -f16_to_f32(k.m);
  o.has_min = true;
}
void dec_q8_0(const std::uint8_t* row, std::int64_t b, Decoded& o) {
  const auto k = load<formats::BlockQ8_0>(row + b * sizeof(formats::BlockQ8_0));
  for (int l = 0; l < kBlock; ++l) o.u[l] = static_cast<std::uint8_t>(k.qs[l] + 128);
  o.off = 128;
  o.dw[0] = o.dw[1] = f16_to_f32(k.d);
}

// K-quants: block j (0..7) of super-block b / 8.
void dec_q4_k(const std::uint8_t* row, std::int64_t b, Decoded& o) {
  const std::uint8_t* s = row + b / 8 * sizeof(formats::BlockQ4_K);
  const int j = static_cast<int>(b % 8);
  const std::uint8_t* q = s + offsetof(formats::BlockQ4_K, qs) + 32 * (j / 2);
  for (int l = 0; l < kBlock; ++l) o.u[l] = static_cast<std::uint8_t>(j % 2 ? q[l] >> 4 : q[l] & 0xF);
  std::uint8_t sc, m;
  formats::scale_min_k4(j, s + offsetof(formats::BlockQ4_K, scales), sc, m);
  o.dw[0] = o.dw[1] = half_at(s + offsetof(formats::BlockQ4_K, d)) * sc;
  o.mn[0] = o.mn[1] = half_at(s + offsetof(formats::BlockQ4_K, dmin)) * m;
  o.has_min = true;
}
void dec_q5_k(const std::uint8_t* row, std::int64_t b, Decoded& o) {
  const std::uint8_t* s = row + b / 8 * sizeof(formats::BlockQ5_K);
  const int j = static_cast<int>(b % 8);
  const std::uint8_t* q = s + offsetof(formats::BlockQ5_K, qs) + 32 * (j / 2);
  const std::uint8_t* qh = s + offsetof(formats::BlockQ5_K, qh);
  for (int l = 0; l < kBlock; ++l) o.u[l] = static_cast<std::uint8_t>((j % 2 ? q[l] >> 4 : q[l] & 0xF) | ((qh[l] >> j) & 1) << 4);
  std::uint8_t sc, m;
  formats::scale_min_k4(j, s + offsetof(formats::BlockQ5_K, scales), sc, m);
  o.dw[0] = o.dw[1] = half_at(s + offsetof(formats::BlockQ5_K, d)) * sc;
  o.mn[0] = o.mn[1] = half_at(s + offsetof(formats::BlockQ5_K, dmin)) * m;
  o.has_min = true;
}
void dec_q6_k(const std::uint8_t* row, std::int64_t b, Decoded& o) {
  const std::uint8_t* s = row + b / 8 * sizeof(formats::BlockQ6_K);
  const int j = static_cast<int>(b % 8), h = j / 4, g = j % 4;
  const std::uint8_t* ql = s + offsetof(formats::BlockQ6_K, ql) + 64 * h + 32 * (g % 2);
  const std::uint8_t* qh = s + offsetof(formats::BlockQ6_K, qh) + 32 * h;
  for (int l = 0; l < kBlock; ++l) o.u[l] = static_cast<std::uint8_t>((g < 2 ? ql[l] & 0xF : ql[l] >> 4) | ((qh[l] >> (2 * g)) & 3) << 4);
  const auto* sc = reinterpret_cast<const std::int8_t*>(s + offsetof(formats::BlockQ6_K, scales));
  const float d = half_at(s + offsetof(formats::BlockQ6_K, d));
  o.off = 32;
  o.dw[0] = d * sc[2 * j];
  o.dw[1] = d * sc[2 * j + 1];
}
void dec_q3_k(const std::uint8_t* row, std::int64_t b, Decoded& o) {
  const std::uint8_t* s = row + b / 8 * sizeof(formats::BlockQ3_K);
  const int j = static_cast<int>(b % 8), h = j / 4, g = j % 4;
  const std::uint8_t* q = s + offsetof(formats::BlockQ3_K, qs) + 32 * h;
  const std::uint8_t* hm = s + offsetof(formats::BlockQ3_K, hmask);
  for (int l = 0; l < kBlock; ++l) o.u[l] = static_cast<std::uint8_t>(((q[l] >> (2 * g)) & 3) | ((hm[l] >> j) & 1) << 2);
  const std::int8_t* scales = q3k_scales(s + offsetof(formats::BlockQ3_K, scales));
  const float d = half_at(s + offsetof(formats::BlockQ3_K, d));
  o.off = 4;
  o.dw[0] = d * (scales[2 * j] - 32);
  o.dw[1] = d * (scales[2 * j + 1] - 32);
}
void dec_q2_k(const std::uint8_t* row, std::int64_t b, Decoded& o) {
  const std::uint8_t* s = row + b / 8 * sizeof(formats::BlockQ2_K);
  const int j = static_cast<int>(b % 8), h = j / 4, g = j % 4;
  const std::uint8_t* q = s + offsetof(formats::BlockQ2_K, qs) + 32 * h;
  for (int l = 0; l < kBlock; ++l) o.u[l] = static_cast<std::uint8_t>((q[l] >> (2 * g)) & 3);
  const std::uint8_t* sc = s + offsetof(formats::BlockQ2_K, scales) + 2 * j;
  const float d = half_at(s + offsetof(formats::BlockQ2_K, d)), dmin = half_at(s + offsetof(formats::BlockQ2_K, dmin));
  for (int k = 0; k < 2; ++k) {
    o.dw[k] = d * (sc[k] & 0xF);
    o.mn[k] = dmin * (sc[k] >> 4);
  }
  o.has_min = true;
}

using Decoder = void (*)(const std::uint8_t*, std::int64_t, Decoded&);

template <Decoder Dec>
void kernel_scalar(const std::uint8_t* w, std::size_t row_bytes, int nr, const BlockQ8* xq, int nt, std::int64_t cols, float* y,
                   std::int64_t y_stride) {
  const std::int64_t nb = cols / kBlock;
  constexpr int kTok = 64;
  float acc[kTok];
  Decoded o;
  for (int t0 = 0; t0 < nt; t0 += kTok) {
    const int tn = nt - t0 < kTok ? nt - t0 : kTok;
    for (int r = 0; r < nr; ++r) {
      const std::uint8_t* row = w + static_cast<std::size_t>(r) * row_bytes;
      for (int t = 0; t < tn; ++t) acc[t] = 0.0f;
      for (std::int64_t b = 0; b < nb; ++b) {
        Dec(row, b, o);
        for (int t = 0; t < tn; ++t) {
          const BlockQ8& x = xq[(t0 + t) * nb + b];
          float a = acc[t];
          for (int h = 0; h < 2; ++h) {
            int s = 0;
            for (int l = 16 * h; l < 16 * h + 16; ++l) s += o.u[l] * x.qs[l];
            s -= o.off * x.sum[h];
            a = std::fma(static_cast<float>(s), o.dw[h] * x.d, a);
          }
          if (o.has_min)
            for (int h = 0; h < 2; ++h) a = std::fma(-o.mn[h], x.d * static_cast<float>(x.sum[h]), a);
          acc[t] = a;
        }
      }
      for (int t = 0; t < tn; ++t) y[(t0 + t) * y_stride + r] = acc[t];
    }
  }
}

}  // namespace

const std::int8_t* q3k_scales(const std::uint8_t* packed) {
  // The 16 six-bit scales: low nibbles from bytes 0-7, high 2 bits from bytes 8-11 (as dequant_q3_k).
  thread_local std::int8_t out[16];
  constexpr std::uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  std::uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const std::uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(out, aux, 16);
  return out;
}

Kernel kernel_scalar(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::Q4_0: return kernel_scalar<dec_q4_0>;
    case GgmlType::Q4_1: return kernel_scalar<dec_q4_1>;
    case GgmlType::Q5_0: return kernel_scalar<dec_q5_0>;
    case GgmlType::Q5_1: return kernel_scalar<dec_q5_1>;
    case GgmlType::Q8_0: return kernel_scalar<dec_q8_0>;
    case GgmlType::Q2_K: return kernel_scalar<dec_q2_k>;
    case GgmlType::Q3_K: return kernel_scalar<dec_q3_k>;
    case GgmlType::Q4_K: return kernel_scalar<dec_q4_k>;
    case GgmlType::Q5_K: return kernel_scalar<dec_q5_k>;
    case GgmlType::Q6_K: return kernel_scalar<dec_q6_k>;
    default: return nullptr;
  }
}

}  // namespace mo::ops::q8
