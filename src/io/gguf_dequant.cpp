#include "mo/io/gguf_dequant.h"

// The loops follow ggml-quants.c's dequantize_row_* operation for operation. Every product of an f16
// scale (11 significant bits) with a block's small integers fits f32's 24 bits, except Q6_K's last
// product, which has no addition after it. So each weight is rounded at most once, and the results
// equal llama.cpp's and gguf-py's whether or not the compiler fuses `d * q - m` into an FMA.

#include <fmt/format.h>

#include <cstring>
#include <span>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/formats/ggml_types.h"
#include "mo/formats/gguf_blocks.h"
#include "mo/formats/k_scales.h"

namespace mo::gguf {

namespace {

using formats::scale_min_k4;

using namespace mo::formats;

// Tensor data in a file is only as aligned as general.alignment says (it may be 1), so blocks are
// copied out rather than read through a cast pointer.
template <typename Block>
Block load(const std::uint8_t* src, std::int64_t i) {
  Block b;
  std::memcpy(&b, src + i * static_cast<std::int64_t>(sizeof(Block)), sizeof(Block));
  return b;
}

void dequant_q4_0(const std::uint8_t* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += formats::QK4_0) {
    const auto b = load<formats::BlockQ4_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < formats::QK4_0 / 2; ++j) {
      const int x0 = (b.qs[j] & 0x0F) - 8;
      const int x1 = (b.qs[j] >> 4) - 8;
      y[j] = x0 * d;
      y[j + formats::QK4_0 / 2] = x1 * d;
    }
  }
}

void dequant_q4_1(const std::uint8_t* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += formats::QK4_1) {
    const auto b = load<formats::BlockQ4_1>(src, i);
    const float d = f16_to_f32(b.d);
    const float m = f16_to_f32(b.m);
    for (int j = 0; j < formats::QK4_1 / 2; ++j) {
      const int x0 = b.qs[j] & 0x0F;
      const int x1 = b.qs[j] >> 4;
      y[j] = x0 * d + m;
      y[j + formats::QK4_1 / 2] = x1 * d + m;
    }
  }
}

void dequant_q5_0(const std::uint8_t* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += formats::QK5_0) {
    const auto b = load<formats::BlockQ5_0>(src, i);
    const float d = f16_to_f32(b.d);
    std::uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof(qh));
    for (int j = 0; j < formats::QK5_0 / 2; ++j) {
      const std::uint8_t xh_0 = ((qh >> j) << 4) & 0x10;
      const std::uint8_t xh_1 = (qh >> (j + 12)) & 0x10;
      const std::int32_t x0 = ((b.qs[j] & 0x0F) | xh_0) - 16;
      const std::int32_t x1 = ((b.qs[j] >> 4) | xh_1) - 16;
      y[j] = x0 * d;
      y[j + formats::QK5_0 / 2] = x1 * d;
    }
  }
}

void dequant_q5_1(const std::uint8_t* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += formats::QK5_1) {
    const auto b = load<formats::BlockQ5_1>(src, i);
    const float d = f16_to_f32(b.d);
    const float m = f16_to_f32(b.m);
    std::uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof(qh));
    for (int j = 0; j < formats::QK5_1 / 2; ++j) {
      const std::uint8_t xh_0 = ((qh >> j) << 4) & 0x10;
      const std::uint8_t xh_1 = (qh >> (j + 12)) & 0x10;
      const int x0 = (b.qs[j] & 0x0F) | xh_0;
      const int x1 = (b.qs[j] >> 4) | xh_1;
      y[j] = x0 * d + m;
      y[j + formats::QK5_1 / 2] = x1 * d + m;
    }
  }
}

void dequant_q8_0(const std::uint8_t* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += formats::QK8_0) {
    const auto b = load<formats::BlockQ8_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < formats::QK8_0; ++j) y[j] = b.qs[j] * d;
  }
}

void dequant_q2_k(const std::uint8_t* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const auto b = load<formats::BlockQ2_K>(src, i);
    const float d = f16_to_f32(b.d);
    const float min = f16_to_f32(b.dmin);
    const std::uint8_t* q = b.qs;
    int is = 0;
    for (int n = 0; n < formats::QK_K; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const std::uint8_t sc = b.scales[is++];
          const float dl = d * (sc & 0xF);
          const float ml = min * (sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
      q += 32;
    }
  }
}

void dequant_q3_k(const std::uint8_t* src, float* y, std::int64_t nb) {
  constexpr std::uint32_t kmask1 = 0x03030303;
  constexpr std::uint32_t kmask2 = 0x0f0f0f0f;
  for (std::int64_t i = 0; i < nb; ++i) {
    const auto b = load<formats::BlockQ3_K>(src, i);
    const float d_all = f16_to_f32(b.d);

    // Unpack the 16 six-bit scales: low nibbles from bytes 0-7, high 2 bits from bytes 8-11.
    std::uint32_t aux[4];
    std::memcpy(aux, b.scales, 12);
    const std::uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    std::int8_t scales[16];
    std::memcpy(scales, aux, sizeof(scales));

    const std::uint8_t* q = b.qs;
    std::uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < formats::QK_K; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * (scales[is++] - 32);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            *y++ = dl * (static_cast<std::int8_t>((q[l] >> shift) & 3) - ((b.hmask[l] & m) ? 0 : 4));
          }
        }
        m <<= 1;
      }
      q += 32;
    }
  }
}

void dequant_q4_k(const std::uint8_t* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const auto b = load<formats::BlockQ4_K>(src, i);
    const float d = f16_to_f32(b.d);
    const float min = f16_to_f32(b.dmin);
    const std::uint8_t* q = b.qs;
    for (int is = 0; is < formats::QK_K / 32; is += 2) {
      std::uint8_t sc, m;
      formats::scale_min_k4(is, b.scales, sc, m);
      const float d1 = d * sc;
      const float m1 = min * m;
      formats::scale_min_k4(is + 1, b.scales, sc, m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
    }
  }
}

void dequant_q5_k(const std::uint8_t* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const auto b = load<formats::BlockQ5_K>(src, i);
    const float d = f16_to_f32(b.d);
    const float min = f16_to_f32(b.dmin);
    const std::uint8_t* ql = b.qs;
    std::uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < formats::QK_K / 32; is += 2) {
      std::uint8_t sc, m;
      formats::scale_min_k4(is, b.scales, sc, m);
      const float d1 = d * sc;
      const float m1 = min * m;
      formats::scale_min_k4(is + 1, b.scales, sc, m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (b.qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (b.qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

void dequant_q6_k(const std::uint8_t* src, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const auto b = load<formats::BlockQ6_K>(src, i);
    const float d = f16_to_f32(b.d);
    const std::uint8_t* ql = b.ql;
    const std::uint8_t* qh = b.qh;
    const std::int8_t* sc = b.scales;
    for (int n = 0; n < formats::QK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = static_cast<std::int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<std::int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<std::int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<std::int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void dequant_f32(const std::uint8_t* src, float* y, std::int64_t n) {
  if (n > 0) std::memcpy(y, src, static_cast<std::size_t>(n) * sizeof(float));  // an empty tensor has no buffer
}

void dequant_f16(const std::uint8_t* src, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    y[i] = f16_to_f32(h);
  }
}

void dequant_bf16(const std::uint8_t* src, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    y[i] = bf16_to_f32(h);
  }
}

// Each function takes the number of blocks (weights for F32/F16/BF16, whose blocks are 1 weight).
using RowFn = void (*)(const std::uint8_t*, float*, std::int64_t);

RowFn row_fn(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: return dequant_f32;
    case GgmlType::F16: return dequant_f16;
    case GgmlType::BF16: return dequant_bf16;
    case GgmlType::Q4_0: return dequant_q4_0;
    case GgmlType::Q4_1: return dequant_q4_1;
    case GgmlType::Q5_0: return dequant_q5_0;
    case GgmlType::Q5_1: return dequant_q5_1;
    case GgmlType::Q8_0: return dequant_q8_0;
    case GgmlType::Q2_K: return dequant_q2_k;
    case GgmlType::Q3_K: return dequant_q3_k;
    case GgmlType::Q4_K: return dequant_q4_k;
    case GgmlType::Q5_K: return dequant_q5_k;
    case GgmlType::Q6_K: return dequant_q6_k;
    default: return nullptr;
  }
}

std::string type_label(std::uint32_t type) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  return info != nullptr ? fmt::format("ggml type {} ({})", type, info->name) : fmt::format("ggml type {}", type);
}

}  // namespace

bool can_dequantize(std::uint32_t ggml_type) { return row_fn(ggml_type) != nullptr; }

void dequantize_row(std::uint32_t ggml_type, const void* src, float* dst, std::int64_t n) {
  const RowFn fn = row_fn(ggml_type);
  if (fn == nullptr) throw Error(fmt::format("cannot dequantize {}", type_label(ggml_type)));
  const std::uint32_t block = ggml_type_info(ggml_type)->block_size;
  if (n < 0 || n % block != 0) {
    throw Error(fmt::format("cannot dequantize {} weights of {}: not a multiple of its block size {}", n, type_label(ggml_type), block));
  }
  fn(static_cast<const std::uint8_t*>(src), dst, n / block);
}

std::vector<float> dequantize(const File& file, const TensorInfo& tensor) {
  if (!can_dequantize(tensor.type)) {
    throw Error(fmt::format("{}: tensor '{}': cannot dequantize {}", file.path, tensor.name, type_label(tensor.type)));
  }
  const std::span<const std::uint8_t> bytes = file.tensor_bytes(tensor);
  std::vector<float> out(tensor.n_elements());
  dequantize_row(tensor.type, bytes.data(), out.data(), static_cast<std::int64_t>(out.size()));
  return out;
}

}  // namespace mo::gguf
