// Activation rows to BlockQ8: ggml's quantize_row_q8_0 rule (d = amax / 127, q = round(x / d)) with
// an f32 scale and the half-block sums the offset/min weight formats need. The AVX2 path rounds the
// same way (cvtps = round-to-nearest-even, as nearbyint), so both give identical blocks.
#include <immintrin.h>

#include <cmath>

#include "q8.h"

namespace mo::ops::q8 {
namespace {

void quantize_block_scalar(const float* v, BlockQ8& o) {
  float amax = 0.0f;
  for (int i = 0; i < kBlock; ++i) amax = std::fmax(amax, std::fabs(v[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int s0 = 0, s1 = 0;
  for (int i = 0; i < kBlock; ++i) {
    const int q = static_cast<int>(std::nearbyint(v[i] * id));
    o.qs[i] = static_cast<std::int8_t>(q);
    (i < kBlock / 2 ? s0 : s1) += q;
  }
  o.d = d;
  o.sum[0] = static_cast<std::int16_t>(s0);
  o.sum[1] = static_cast<std::int16_t>(s1);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

__attribute__((target("avx2,fma"))) void quantize_block_avx2(const float* v, BlockQ8& o) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 a[4];
  for (int k = 0; k < 4; ++k) a[k] = _mm256_loadu_ps(v + 8 * k);
  __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, a[0]), _mm256_andnot_ps(sign, a[1])),
                           _mm256_max_ps(_mm256_andnot_ps(sign, a[2]), _mm256_andnot_ps(sign, a[3])));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const float amax = _mm_cvtss_f32(h);  // max is exact, so the order does not matter
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const __m256 vid = _mm256_set1_ps(id);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(a[k], vid));
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.qs), _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  o.d = d;
  o.sum[0] = static_cast<std::int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
  o.sum[1] = static_cast<std::int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
}

bool cpu_has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}
#endif

}  // namespace

void quantize_rows(const float* x, std::int64_t n, std::int64_t cols, std::int64_t x_stride, BlockQ8* out) {
  const std::int64_t nb = cols / kBlock;
#if defined(__x86_64__)
  if (simd_level() != SimdLevel::scalar && cpu_has_avx2()) {
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t b = 0; b < nb; ++b) quantize_block_avx2(x + t * x_stride + b * kBlock, out[t * nb + b]);
    return;
  }
#endif
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t b = 0; b < nb; ++b) quantize_block_scalar(x + t * x_stride + b * kBlock, out[t * nb + b]);
}

}  // namespace mo::ops::q8
