#pragma once
// 8-lane f32 / int32 vector traits for the kernels written once over a vector type (qdot_kernels.h,
// ftile_kernel.h). Included by the AVX2 translation units inside their target region; unnamed
// namespace so the per-level copies never merge at link time.
#include <immintrin.h>

#include <cstdint>

namespace mo::ops::simd {
namespace {

struct Vec256 {
  using F = __m256;
  using I = __m256i;
  static constexpr int kLanes = 8;

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static I set1i(int v) { return _mm256_set1_epi32(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  // The first `len` (< kLanes) floats at p, the rest zero, reading nothing past p + len.
  static F load_tail(const float* p, int len) {
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(len), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
  }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void store_tail(float* p, F v, int len) {
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(len), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), v);
  }
  // kLanes halves / bfloat16s at p as f32 (exact).
  static F load_f16(const void* p) { return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  static F load_bf16(const void* p) {
    const I v = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  // kLanes bytes at p widened to int32 lanes.
  static I load_u8(const std::uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static I load_i8(const std::uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fmsub(F a, F b, F c) { return _mm256_fmsub_ps(a, b, c); }
  static F to_f32(I v) { return _mm256_cvtepi32_ps(v); }
  static I and_(I a, I b) { return _mm256_and_si256(a, b); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  template <int N>
  static I srli(I v) {
    return _mm256_srli_epi32(v, N);
  }
  template <int N>
  static I slli(I v) {
    return _mm256_slli_epi32(v, N);
  }

  // Two horizontal sums in different lane orders; each kernel keeps the one its results were pinned with.
  // (lo + hi) then movehl / movehdup: ((0+4)+(2+6)) + ((1+5)+(3+7)).
  static float hsum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // (lo + hi) then two hadds: ((0+4)+(1+5)) + ((2+6)+(3+7)).
  static float hsum_hadd(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_hadd_ps(s, s);
    s = _mm_hadd_ps(s, s);
    return _mm_cvtss_f32(s);
  }
};

}  // namespace
}  // namespace mo::ops::simd
