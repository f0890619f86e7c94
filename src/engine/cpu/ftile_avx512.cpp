// AVX-512 float-tile micro-kernel: 4 rows × 6 tokens = 24 zmm accumulators (+4 weight, 1 token
// register) for prefill, 4 rows × 1 token for decode. Per (row, token): one 16-lane accumulator,
// k = 0, 16, 32, ... with _mm512_fmadd_ps, a zero-padded last vector when cols % 16 != 0, then
// _mm512_reduce_add_ps: the same operations for every tile shape.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ftile.h"

#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx512f,avx2,fma,f16c")
// GCC 12 warns about the deliberately undefined upper lanes inside its own AVX-512 intrinsics.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "ftile_blocking.h"

namespace mo::ops::ftile {
namespace {

struct Avx512 {
  static constexpr int kMR = 4, kNR = 6, kDecodeMR = 4;

  // Weight sources: 16 weights at element k of a row as f32 (exact), and the zero-padded tail.
  struct F32 {
    static constexpr int kBytes = 4;
    static __m512 load(const std::uint8_t* row, std::int64_t k) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k); }
    static __m512 load_tail(const std::uint8_t* row, std::int64_t k, int len) {
      return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << len) - 1), reinterpret_cast<const float*>(row) + k);
    }
    static void decode(const std::uint8_t* row, std::int64_t cols, float* out) { std::memcpy(out, row, cols * 4); }
  };
  struct F16 {
    static constexpr int kBytes = 2;
    static __m512 cvt(__m256i h) { return _mm512_cvtph_ps(h); }
    static __m512 load(const std::uint8_t* row, std::int64_t k) {
      return cvt(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
    }
    static __m512 load_tail(const std::uint8_t* row, std::int64_t k, int len) {
      std::uint16_t h[16] = {};
      std::memcpy(h, row + 2 * k, 2 * len);
      return cvt(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
    }
    static void decode(const std::uint8_t* row, std::int64_t cols, float* out) {
      std::int64_t k = 0;
      for (; k + 16 <= cols; k += 16) _mm512_storeu_ps(out + k, load(row, k));
      if (k < cols) _mm512_mask_storeu_ps(out + k, static_cast<__mmask16>((1u << (cols - k)) - 1), load_tail(row, k, static_cast<int>(cols - k)));
    }
  };
  struct BF16 {
    static constexpr int kBytes = 2;
    static __m512 cvt(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
    static __m512 load(const std::uint8_t* row, std::int64_t k) {
      return cvt(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
    }
    static __m512 load_tail(const std::uint8_t* row, std::int64_t k, int len) {
      std::uint16_t h[16] = {};
      std::memcpy(h, row + 2 * k, 2 * len);
      return cvt(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
    }
    static void decode(const std::uint8_t* row, std::int64_t cols, float* out) {
      std::int64_t k = 0;
      for (; k + 16 <= cols; k += 16) _mm512_storeu_ps(out + k, load(row, k));
      if (k < cols) _mm512_mask_storeu_ps(out + k, static_cast<__mmask16>((1u << (cols - k)) - 1), load_tail(row, k, static_cast<int>(cols - k)));
    }
  };

  // Prefetch: also pull in the next MR rows (the next tile of a row-major sweep) while this one runs.
  template <class Src, int MR, int NR, bool Prefetch>
  static void tile(const std::uint8_t* w, std::size_t ws, const float* x, std::int64_t xs, std::int64_t cols, float* y,
                   std::int64_t ys) {
    __m512 acc[MR][NR];
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 32
      for (int t = 0; t < NR; ++t) acc[r][t] = _mm512_setzero_ps();
    std::int64_t k = 0;
    for (; k + 16 <= cols; k += 16) {
      __m512 wv[MR];
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) wv[r] = Src::load(w + r * ws, k);
      if constexpr (Prefetch) {  // sweep the tile two tiles ahead linearly into L2, as many bytes per step as it reads:
        // interleaved short row streams defeat the hardware prefetcher (decode from DRAM was slower without)
        const char* p = reinterpret_cast<const char*>(w + 2 * MR * ws) + k * MR * Src::kBytes;
#pragma GCC unroll 32
        for (int j = 0; j < MR * 16 * Src::kBytes; j += 64) _mm_prefetch(p + j, _MM_HINT_T1);
      }
#pragma GCC unroll 32
      for (int t = 0; t < NR; ++t) {
        __m512 xv = _mm512_loadu_ps(x + t * xs + k);
        __asm__("" : "+v"(xv));  // one load per token, not one folded into each of the MR FMAs
#pragma GCC unroll 32
        for (int r = 0; r < MR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
    if (k < cols) {  // zero-padded last vector: 0·0 leaves the accumulator unchanged lane by lane
      const int len = static_cast<int>(cols - k);
      const __mmask16 m = static_cast<__mmask16>((1u << len) - 1);
      __m512 wv[MR];
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) wv[r] = Src::load_tail(w + r * ws, k, len);
#pragma GCC unroll 32
      for (int t = 0; t < NR; ++t) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * xs + k);
#pragma GCC unroll 32
        for (int r = 0; r < MR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
#pragma GCC unroll 32
    for (int t = 0; t < NR; ++t)
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
};

}  // namespace

RowRange kernel_avx512(std::uint32_t type) {
  switch (type) {
    case 0: return run_rows<Avx512, Avx512::F32>;
    case 1: return run_rows<Avx512, Avx512::F16>;
    case 30: return run_rows<Avx512, Avx512::BF16>;
    default: return nullptr;
  }
}

}  // namespace mo::ops::ftile

MO_SIMD_TARGET_POP
#else
namespace mo::ops::ftile {
RowRange kernel_avx512(std::uint32_t) { return nullptr; }
}  // namespace mo::ops::ftile
#endif
