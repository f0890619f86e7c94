// AVX2 + FMA + F16C float-tile micro-kernel: 3 rows × 4 tokens = 12 ymm accumulators (+3 weight,
// 1 token register) for prefill, 8 rows × 1 token for decode. Per (row, token): one 8-lane
// accumulator, k = 0, 8, 16, ... with _mm256_fmadd_ps, a zero-padded last vector when cols % 8 != 0,
// then one fixed horizontal sum: the same operations for every tile shape.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ftile.h"

#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx2,fma,f16c")

#include "ftile_blocking.h"

namespace mo::ops::ftile {
namespace {

inline __m256 load_f16x8(const void* p) { return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
inline __m256 load_bf16x8(const void* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

struct Avx2 {
  static constexpr int kMR = 3, kNR = 4, kDecodeMR = 8;

  // Weight sources: 8 weights at element k of a row as f32 (exact), and the zero-padded tail.
  struct F32 {
    static constexpr int kBytes = 4;
    static __m256 load(const std::uint8_t* row, std::int64_t k) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k); }
    static __m256 load_tail(const std::uint8_t* row, std::int64_t k, int len) {
      float v[8] = {};
      std::memcpy(v, row + 4 * k, 4 * len);
      return _mm256_loadu_ps(v);
    }
    static void decode(const std::uint8_t* row, std::int64_t cols, float* out) { std::memcpy(out, row, cols * 4); }
  };
  template <__m256 (*Cvt)(const void*)>
  struct Half {
    static constexpr int kBytes = 2;
    static __m256 load(const std::uint8_t* row, std::int64_t k) { return Cvt(row + 2 * k); }
    static __m256 load_tail(const std::uint8_t* row, std::int64_t k, int len) {
      std::uint16_t h[8] = {};
      std::memcpy(h, row + 2 * k, 2 * len);
      return Cvt(h);
    }
    static void decode(const std::uint8_t* row, std::int64_t cols, float* out) {
      std::int64_t k = 0;
      for (; k + 8 <= cols; k += 8) _mm256_storeu_ps(out + k, load(row, k));
      if (k < cols) {
        float v[8];
        _mm256_storeu_ps(v, load_tail(row, k, static_cast<int>(cols - k)));
        std::memcpy(out + k, v, 4 * (cols - k));
      }
    }
  };
  using F16 = Half<load_f16x8>;
  using BF16 = Half<load_bf16x8>;

  // Prefetch: also pull in the next MR rows (the next tile of a row-major sweep) while this one runs.
  template <class Src, int MR, int NR, bool Prefetch>
  static void tile(const std::uint8_t* w, std::size_t ws, const float* x, std::int64_t xs, std::int64_t cols, float* y,
                   std::int64_t ys) {
    __m256 acc[MR][NR];
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 32
      for (int t = 0; t < NR; ++t) acc[r][t] = _mm256_setzero_ps();
    std::int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
      __m256 wv[MR];
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) wv[r] = Src::load(w + r * ws, k);
      if constexpr (Prefetch) {  // sweep the tile two tiles ahead linearly into L2, as many bytes per step as it reads:
        // interleaved short row streams defeat the hardware prefetcher
        const char* p = reinterpret_cast<const char*>(w + 2 * MR * ws) + k * MR * Src::kBytes;
#pragma GCC unroll 32
        for (int j = 0; j < MR * 8 * Src::kBytes; j += 64) _mm_prefetch(p + j, _MM_HINT_T1);
      }
#pragma GCC unroll 32
      for (int t = 0; t < NR; ++t) {
        const __m256 xv = _mm256_loadu_ps(x + t * xs + k);
#pragma GCC unroll 32
        for (int r = 0; r < MR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
    if (k < cols) {  // zero-padded last vector: 0·0 leaves the accumulator unchanged lane by lane
      const int len = static_cast<int>(cols - k);
      const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(len), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      __m256 wv[MR];
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) wv[r] = Src::load_tail(w + r * ws, k, len);
#pragma GCC unroll 32
      for (int t = 0; t < NR; ++t) {
        const __m256 xv = _mm256_maskload_ps(x + t * xs + k, m);
#pragma GCC unroll 32
        for (int r = 0; r < MR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
#pragma GCC unroll 32
    for (int t = 0; t < NR; ++t)
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) y[t * ys + r] = hsum(acc[r][t]);
  }
};

}  // namespace

RowRange kernel_avx2(std::uint32_t type) {
  switch (type) {
    case 0: return run_rows<Avx2, Avx2::F32>;
    case 1: return run_rows<Avx2, Avx2::F16>;
    case 30: return run_rows<Avx2, Avx2::BF16>;
    default: return nullptr;
  }
}

}  // namespace mo::ops::ftile

MO_SIMD_TARGET_POP
#else
namespace mo::ops::ftile {
RowRange kernel_avx2(std::uint32_t) { return nullptr; }
}  // namespace mo::ops::ftile
#endif
