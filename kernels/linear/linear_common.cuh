#pragma once
// Shared pieces of the linear kernels: the plain argument struct the kernels take (no host-only
// types), exact small-integer -> float conversion, and the single-weight decoders of every packed
// layout (backend.h's LinearKind), which the dequantize-to-f16 kernels use and the GEMV kernels mirror.
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "check.cuh"
#include "mo/formats/k_scales.h"

// cuBLAS calls go through this: a failure throws mo::Error naming the op and cuBLAS's status string.
#define MO_CUBLAS_CHECK(op, expr)                                                                                                 \
  do {                                                                                                                            \
    cublasStatus_t mo_st_ = (expr);                                                                                               \
    if (mo_st_ != CUBLAS_STATUS_SUCCESS) throw ::mo::Error(std::string(op) + ": cuBLAS error: " + cublasGetStatusString(mo_st_)); \
  } while (0)

namespace mo::engine::cuda_dev::lin {

enum class Kind { f16, q8_0, q4_k, q6_k, awq, gptq };  // mirrors LinearKind (kept free of host headers)

// DeviceLinear as the kernels see it.
struct Args {
  Kind kind = Kind::f16;
  std::int64_t rows = 0, cols = 0;
  const std::uint8_t* w = nullptr;  // weight / qweight bytes
  std::int64_t row_bytes = 0;       // GGUF kinds
  const std::uint32_t* qzeros = nullptr;
  const std::uint16_t* scales = nullptr;
  const std::int32_t* g_idx = nullptr;
  int bits = 4;
  std::int64_t group_size = 0, groups = 0;
  int zero_add = 0;  // 1 for GPTQ v1 (stored zero = true zero - 1)
};

constexpr int kMaxGemvTokens = 8;  // n <= 8: fused GEMV kernels; larger n: dequantize + cuBLAS

// f16 bits -> f32.
__device__ __forceinline__ float h2f(std::uint16_t b) { return __half2float(__ushort_as_half(b)); }

// 2^23 + q as a float: the difference of two such values is q1 - q2 exactly, without an int->float
// conversion (quarter rate on recent GPUs), for any q < 2^23.
__device__ __forceinline__ float magic(std::uint32_t q) { return __int_as_float(0x4B000000u | q); }

// AWQ: nibble k of a word holds output 8c + (0,2,4,6,1,3,5,7)[k]; awq_shift(j) is the bit offset of output 8c + j.
__device__ __forceinline__ int awq_out(int k) { return (k & 3) * 2 + (k >> 2); }
__device__ __forceinline__ int awq_shift(int j) { return 4 * ((j >> 1) | ((j & 1) << 2)); }

// Little-endian u16 from any byte address (GGUF blocks may sit at odd offsets in the fallback path).
__device__ __forceinline__ std::uint16_t ld_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

// Weight (r, k) of W, computed with the same f32 operations as the CPU reference (gguf_dequant.cpp for
// the GGUF kinds, formats::QuantizedLinear::weight for AWQ/GPTQ). Byte loads only for GGUF: any alignment.
__device__ __forceinline__ float weight_at(const Args& a, std::int64_t r, std::int64_t k) {
  switch (a.kind) {
    case Kind::f16: return h2f(reinterpret_cast<const std::uint16_t*>(a.w)[r * a.cols + k]);
    case Kind::q8_0: {
      const std::uint8_t* b = a.w + r * a.row_bytes + (k / 32) * 34;
      return static_cast<float>(static_cast<std::int8_t>(b[2 + k % 32])) * h2f(ld_u16(b));
    }
    case Kind::q4_k: {
      const std::uint8_t* b = a.w + r * a.row_bytes + (k / 256) * 144;
      const int i = static_cast<int>(k % 256), j = i / 64, hi = (i / 32) & 1;
      const std::uint8_t qb = b[16 + 32 * j + i % 32];
      int sc, m;
      formats::scale_min_k4(2 * j + hi, b + 4, sc, m);
      const float d1 = h2f(ld_u16(b)) * static_cast<float>(sc), m1 = h2f(ld_u16(b + 2)) * static_cast<float>(m);
      return __fsub_rn(__fmul_rn(d1, static_cast<float>(hi ? qb >> 4 : qb & 0xF)), m1);
    }
    case Kind::q6_k: {
      const std::uint8_t* b = a.w + r * a.row_bytes + (k / 256) * 210;
      const int i = static_cast<int>(k % 256), nh = i / 128, quarter = (i % 128) / 32, l = i % 32;
      const std::uint8_t qlb = b[64 * nh + l + 32 * (quarter & 1)];
      const int low = quarter >= 2 ? qlb >> 4 : qlb & 0xF;
      const int high = (b[128 + 32 * nh + l] >> (2 * quarter)) & 3;
      const int sc = static_cast<std::int8_t>(b[192 + 8 * nh + l / 16 + 2 * quarter]);
      const float ds = __fmul_rn(h2f(ld_u16(b + 208)), static_cast<float>(sc));
      return __fmul_rn(ds, static_cast<float>((low | (high << 4)) - 32));
    }
    case Kind::awq: {
      const std::int64_t packed = a.rows / 8, g = k / a.group_size;
      const int sh = awq_shift(static_cast<int>(r % 8));
      const std::uint32_t word = reinterpret_cast<const std::uint32_t*>(a.w)[k * packed + r / 8];
      const int q = (word >> sh) & 0xF, z = (a.qzeros[g * packed + r / 8] >> sh) & 0xF;
      return __fmul_rn(static_cast<float>(q - z), h2f(a.scales[g * a.rows + r]));
    }
    case Kind::gptq: {
      const int pf = 32 / a.bits;
      const std::uint32_t mask = (1u << a.bits) - 1;
      const std::int64_t g = a.g_idx ? a.g_idx[k] : k / a.group_size;
      const std::uint32_t word = reinterpret_cast<const std::uint32_t*>(a.w)[(k / pf) * a.rows + r];
      const int q = static_cast<int>((word >> (a.bits * (k % pf))) & mask);
      const int z = static_cast<int>((a.qzeros[g * (a.rows / pf) + r / pf] >> (a.bits * (r % pf))) & mask) + a.zero_add;
      return __fmul_rn(static_cast<float>(q - z), h2f(a.scales[g * a.rows + r]));
    }
  }
  return 0.0f;
}

}  // namespace mo::engine::cuda_dev::lin
