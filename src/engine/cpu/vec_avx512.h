#pragma once
// 16-lane f32 / int32 vector traits (AVX-512F) with the interface of Vec256 (vec_avx2.h). Included by
// the AVX-512 translation units inside their target region; unnamed namespace so the per-level copies
// never merge at link time. Its warning switches hold for the rest of that file.
#include <immintrin.h>

// GCC 12 warns about the deliberately undefined upper lanes inside its own AVX-512 intrinsics.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>

namespace mo::ops::simd {
namespace {

struct Vec512 {
  using F = __m512;
  using I = __m512i;
  static constexpr int kLanes = 16;

  static __mmask16 first(int len) { return static_cast<__mmask16>((1u << len) - 1); }

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static I set1i(int v) { return _mm512_set1_epi32(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F load_tail(const float* p, int len) { return _mm512_maskz_loadu_ps(first(len), p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void store_tail(float* p, F v, int len) { _mm512_mask_storeu_ps(p, first(len), v); }
  static F load_f16(const void* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }
  static F load_bf16(const void* p) {
    const I v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
  static I load_u8(const std::uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static I load_i8(const std::uint8_t* p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fmsub(F a, F b, F c) { return _mm512_fmsub_ps(a, b, c); }
  static F to_f32(I v) { return _mm512_cvtepi32_ps(v); }
  static I and_(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  template <int N>
  static I srli(I v) {
    return _mm512_srli_epi32(v, N);
  }
  template <int N>
  static I slli(I v) {
    return _mm512_slli_epi32(v, N);
  }

  // At 16 lanes both kernels reduce the same way.
  static float hsum(F v) { return _mm512_reduce_add_ps(v); }
  static float hsum_hadd(F v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace
}  // namespace mo::ops::simd
