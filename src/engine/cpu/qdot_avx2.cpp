// AVX2 + FMA fused dequantize-and-dot kernels: each block is decoded to 8-lane f32 vectors (the exact
// weights dequantize_row gives) and FMA'd into per-token accumulators.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "mo/formats/ggml_types.h"
#include "mo/formats/gguf_blocks.h"
#include "mo/formats/k_scales.h"
#include "qdot.h"

#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx2,fma,f16c")

namespace mo::ops::qdot {
namespace {

using namespace mo::formats;

inline float half_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
inline __m256i u8x8(const std::uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m256i i8x8(const std::uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m256 to_f32(__m256i v) { return _mm256_cvtepi32_ps(v); }

// Per-token accumulators: two chains per token so one token's FMAs do not wait on each other.
template <int NT>
struct Acc {
  __m256 a[NT][2];
  float tail[NT];
  const float* x;
  std::int64_t xs;
  Acc(const float* x_, std::int64_t xs_) : x(x_), xs(xs_) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) a[t][0] = a[t][1] = _mm256_setzero_ps(), tail[t] = 0.0f;
  }
  // Two 8-weight vectors that meet x at offsets oa and ob.
  inline __attribute__((always_inline)) void add(std::int64_t oa, __m256 wa, std::int64_t ob, __m256 wb) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      a[t][0] = _mm256_fmadd_ps(wa, _mm256_loadu_ps(x + t * xs + oa), a[t][0]);
      a[t][1] = _mm256_fmadd_ps(wb, _mm256_loadu_ps(x + t * xs + ob), a[t][1]);
    }
  }
  // An explicit FMA: left to -ffp-contract, the vectorizer may fuse this for some NT and not for
  // others, and a token's result would then depend on how many tokens share its group.
  inline void add_scalar(std::int64_t o, float w) {
    for (int t = 0; t < NT; ++t) tail[t] = __builtin_fmaf(w, x[t * xs + o], tail[t]);
  }
  float sum(int t) const {
    const __m256 s = _mm256_add_ps(a[t][0], a[t][1]);
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    v = _mm_hadd_ps(v, v);
    v = _mm_hadd_ps(v, v);
    return _mm_cvtss_f32(v) + tail[t];
  }
};

struct F32 {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<NT>& acc) {
    const float* w = reinterpret_cast<const float*>(row);
    std::int64_t i = 0;
    for (; i + 16 <= cols; i += 16) acc.add(i, _mm256_loadu_ps(w + i), i + 8, _mm256_loadu_ps(w + i + 8));
    for (; i < cols; ++i) {
      float v;
      std::memcpy(&v, row + 4 * i, 4);
      acc.add_scalar(i, v);
    }
  }
};

struct F16 {
  static __m256 load(const std::uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<NT>& acc) {
    std::int64_t i = 0;
    for (; i + 16 <= cols; i += 16) acc.add(i, load(row + 2 * i), i + 8, load(row + 2 * i + 16));
    for (; i < cols; ++i) acc.add_scalar(i, half_at(row + 2 * i));
  }
};

struct BF16 {
  static __m256 load(const std::uint8_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<NT>& acc) {
    std::int64_t i = 0;
    for (; i + 16 <= cols; i += 16) acc.add(i, load(row + 2 * i), i + 8, load(row + 2 * i + 16));
    for (; i < cols; ++i) {
      std::uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      acc.add_scalar(i, v);
    }
  }
};

struct Q4_0 {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<NT>& acc) {
    const __m256i lo = _mm256_set1_epi32(0xF), eight = _mm256_set1_epi32(8);
    for (std::int64_t o = 0; o < cols; o += formats::QK4_0, row += sizeof(formats::BlockQ4_0)) {
      const __m256 d = _mm256_set1_ps(half_at(row + offsetof(formats::BlockQ4_0, d)));
      const std::uint8_t* qs = row + offsetof(formats::BlockQ4_0, qs);
      const __m256i qa = u8x8(qs), qb = u8x8(qs + 8);
      acc.add(o, _mm256_mul_ps(to_f32(_mm256_sub_epi32(_mm256_and_si256(qa, lo), eight)), d), o + 8,
              _mm256_mul_ps(to_f32(_mm256_sub_epi32(_mm256_and_si256(qb, lo), eight)), d));
      acc.add(o + 16, _mm256_mul_ps(to_f32(_mm256_sub_epi32(_mm256_srli_epi32(qa, 4), eight)), d), o + 24,
              _mm256_mul_ps(to_f32(_mm256_sub_epi32(_mm256_srli_epi32(qb, 4), eight)), d));
    }
  }
};

struct Q4_1 {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<NT>& acc) {
    const __m256i lo = _mm256_set1_epi32(0xF);
    for (std::int64_t o = 0; o < cols; o += formats::QK4_1, row += sizeof(formats::BlockQ4_1)) {
      const __m256 d = _mm256_set1_ps(half_at(row + offsetof(formats::BlockQ4_1, d)));
      const __m256 m = _mm256_set1_ps(half_at(row + offsetof(formats::BlockQ4_1, m)));
      const std::uint8_t* qs = row + offsetof(formats::BlockQ4_1, qs);
      const __m256i qa = u8x8(qs), qb = u8x8(qs + 8);
      // q * d is exact (4 x 11 bits), so the FMA rounds once, as q * d + m does.
      acc.add(o, _mm256_fmadd_ps(to_f32(_mm256_and_si256(qa, lo)), d, m), o + 8,
              _mm256_fmadd_ps(to_f32(_mm256_and_si256(qb, lo)), d, m));
      acc.add(o + 16, _mm256_fmadd_ps(to_f32(_mm256_srli_epi32(qa, 4)), d, m), o + 24,
              _mm256_fmadd_ps(to_f32(_mm256_srli_epi32(qb, 4)), d, m));
    }
  }
};

struct Q8_0 {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<NT>& acc) {
    for (std::int64_t o = 0; o < cols; o += formats::QK8_0, row += sizeof(formats::BlockQ8_0)) {
      const __m256 d = _mm256_set1_ps(half_at(row + offsetof(formats::BlockQ8_0, d)));
      const std::uint8_t* qs = row + offsetof(formats::BlockQ8_0, qs);
      acc.add(o, _mm256_mul_ps(to_f32(i8x8(qs)), d), o + 8, _mm256_mul_ps(to_f32(i8x8(qs + 8)), d));
      acc.add(o + 16, _mm256_mul_ps(to_f32(i8x8(qs + 16)), d), o + 24, _mm256_mul_ps(to_f32(i8x8(qs + 24)), d));
    }
  }
};

struct Q4_K {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<NT>& acc) {
    const __m256i lo = _mm256_set1_epi32(0xF);
    for (std::int64_t o = 0; o < cols; o += formats::QK_K, row += sizeof(formats::BlockQ4_K)) {
      const float d = half_at(row + offsetof(formats::BlockQ4_K, d));
      const float dmin = half_at(row + offsetof(formats::BlockQ4_K, dmin));
      const std::uint8_t* sc = row + offsetof(formats::BlockQ4_K, scales);
      const std::uint8_t* q = row + offsetof(formats::BlockQ4_K, qs);
      for (int j = 0; j < 4; ++j, q += 32) {
        std::uint8_t s1, m1, s2, m2;
        formats::scale_min_k4(2 * j, sc, s1, m1);
        formats::scale_min_k4(2 * j + 1, sc, s2, m2);
        // d * sc * q is exact (11 + 6 + 4 bits), so fmsub rounds once, as d1 * q - m1 does.
        const __m256 d1 = _mm256_set1_ps(d * s1), n1 = _mm256_set1_ps(dmin * m1);
        const __m256 d2 = _mm256_set1_ps(d * s2), n2 = _mm256_set1_ps(dmin * m2);
        const std::int64_t b = o + 64 * j;
        for (int k = 0; k < 32; k += 16) {
          const __m256i qa = u8x8(q + k), qb = u8x8(q + k + 8);
          acc.add(b + k, _mm256_fmsub_ps(to_f32(_mm256_and_si256(qa, lo)), d1, n1), b + k + 8,
                  _mm256_fmsub_ps(to_f32(_mm256_and_si256(qb, lo)), d1, n1));
          acc.add(b + 32 + k, _mm256_fmsub_ps(to_f32(_mm256_srli_epi32(qa, 4)), d2, n2), b + 40 + k,
                  _mm256_fmsub_ps(to_f32(_mm256_srli_epi32(qb, 4)), d2, n2));
        }
      }
    }
  }
};

struct Q6_K {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<NT>& acc) {
    const __m256i lo = _mm256_set1_epi32(0xF), three = _mm256_set1_epi32(3), k32 = _mm256_set1_epi32(32);
    for (std::int64_t o = 0; o < cols; o += formats::QK_K, row += sizeof(formats::BlockQ6_K)) {
      const float d = half_at(row + offsetof(formats::BlockQ6_K, d));
      for (int h = 0; h < 2; ++h) {
        const std::uint8_t* ql = row + offsetof(formats::BlockQ6_K, ql) + 64 * h;
        const std::uint8_t* qh = row + offsetof(formats::BlockQ6_K, qh) + 32 * h;
        const std::int8_t* sc = reinterpret_cast<const std::int8_t*>(row + offsetof(formats::BlockQ6_K, scales)) + 8 * h;
        for (int l0 = 0; l0 < 32; l0 += 8) {
          const int is = l0 / 16;
          const __m256i a = u8x8(ql + l0), b = u8x8(ql + 32 + l0), hq = u8x8(qh + l0);
          const __m256i q1 = _mm256_sub_epi32(
              _mm256_or_si256(_mm256_and_si256(a, lo), _mm256_slli_epi32(_mm256_and_si256(hq, three), 4)), k32);
          const __m256i q2 = _mm256_sub_epi32(
              _mm256_or_si256(_mm256_and_si256(b, lo),
                              _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hq, 2), three), 4)), k32);
          const __m256i q3 = _mm256_sub_epi32(
              _mm256_or_si256(_mm256_srli_epi32(a, 4),
                              _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hq, 4), three), 4)), k32);
          const __m256i q4 = _mm256_sub_epi32(
              _mm256_or_si256(_mm256_srli_epi32(b, 4), _mm256_slli_epi32(_mm256_srli_epi32(hq, 6), 4)), k32);
          // (d * sc) is exact; the one rounding is of its product with q, as in dequantize_row.
          const std::int64_t base = o + 128 * h + l0;
          acc.add(base, _mm256_mul_ps(to_f32(q1), _mm256_set1_ps(d * sc[is])), base + 32,
                  _mm256_mul_ps(to_f32(q2), _mm256_set1_ps(d * sc[is + 2])));
          acc.add(base + 64, _mm256_mul_ps(to_f32(q3), _mm256_set1_ps(d * sc[is + 4])), base + 96,
                  _mm256_mul_ps(to_f32(q4), _mm256_set1_ps(d * sc[is + 6])));
        }
      }
    }
  }
};

template <class Dec, int NT>
void go(const std::uint8_t* row, std::int64_t cols, const float* x, std::int64_t xs, float* y, std::int64_t ys) {
  Acc<NT> acc(x, xs);
  Dec::template run<NT>(row, cols, acc);
  for (int t = 0; t < NT; ++t) y[t * ys] = acc.sum(t);
}

template <class Dec>
void row_dot_impl(const std::uint8_t* row, std::int64_t cols, const float* x, std::int64_t xs, int nt, float* y,
                  std::int64_t ys) {
  // 4 tokens' accumulators fill half the 16 ymm registers; a larger group takes two passes.
  for (; nt > 4; nt -= 4, x += 4 * xs, y += 4 * ys) go<Dec, 4>(row, cols, x, xs, y, ys);
  switch (nt) {
    case 1: return go<Dec, 1>(row, cols, x, xs, y, ys);
    case 2: return go<Dec, 2>(row, cols, x, xs, y, ys);
    case 3: return go<Dec, 3>(row, cols, x, xs, y, ys);
    default: return go<Dec, 4>(row, cols, x, xs, y, ys);
  }
}

}  // namespace

RowDot row_dot_avx2(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: return row_dot_impl<F32>;
    case GgmlType::F16: return row_dot_impl<F16>;
    case GgmlType::BF16: return row_dot_impl<BF16>;
    case GgmlType::Q4_0: return row_dot_impl<Q4_0>;
    case GgmlType::Q4_1: return row_dot_impl<Q4_1>;
    case GgmlType::Q8_0: return row_dot_impl<Q8_0>;
    case GgmlType::Q4_K: return row_dot_impl<Q4_K>;
    case GgmlType::Q6_K: return row_dot_impl<Q6_K>;
    default: return nullptr;
  }
}

}  // namespace mo::ops::qdot

MO_SIMD_TARGET_POP
#else
namespace mo::ops::qdot {
RowDot row_dot_avx2(std::uint32_t) { return nullptr; }
}  // namespace mo::ops::qdot
#endif
