#pragma once
// The Q4Z tile kernel shared by the AVX2 and AVX-512 VNNI files, which include it under their own
// `#pragma GCC target` and differ only in Dot (int8 pairs -> int32 lanes). Per block and (row, token):
// lanes = Dot(|q - z|, sign(x, q - z)), acc += f32(lanes) * (scale * d); the same operations in the
// same order for every tile shape, so a (row, token) value never depends on nr or nt.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "q4z.h"

// TU-local (anonymous namespace): each including file compiles it for its own target.
namespace mo::ops::q4z {
namespace {
namespace tile {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class Dot, int NR, int NT>
void run(const std::uint8_t* w, std::size_t row_bytes, const q8::BlockQ8* xq, std::int64_t nb, float* y, std::int64_t ys) {
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(15);
  for (std::int64_t b = 0; b < nb; ++b) {
    __m256i aw[NR], sw[NR];
    __m256 ws[NR];
    for (int r = 0; r < NR; ++r) {
      const BlockQ4Z* blk = reinterpret_cast<const BlockQ4Z*>(w + r * row_bytes) + b;
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
      const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), low4);
      sw[r] = _mm256_sub_epi8(q, _mm256_set1_epi8(static_cast<char>(blk->z)));
      aw[r] = _mm256_sign_epi8(sw[r], sw[r]);
      ws[r] = _mm256_set1_ps(_cvtsh_ss(blk->d));
    }
    for (int t = 0; t < NT; ++t) {
      const q8::BlockQ8& xb = xq[t * nb + b];
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
      const __m256 xd = _mm256_set1_ps(xb.d);
      for (int r = 0; r < NR; ++r) {
        const __m256i lanes = Dot::run(aw[r], _mm256_sign_epi8(xv, sw[r]));
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_mul_ps(ws[r], xd), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) y[t * ys + r] = hsum(acc[r][t]);
}

using TileFn = void (*)(const std::uint8_t*, std::size_t, const q8::BlockQ8*, std::int64_t, float*, std::int64_t);

template <class Dot, int MR, int MT, std::size_t... I>
constexpr std::array<TileFn, MR * MT> table(std::index_sequence<I...>) {
  return {&run<Dot, static_cast<int>(I) / MT + 1, static_cast<int>(I) % MT + 1>...};
}

// q8::Kernel over tiles of up to MR rows x MT tokens (MR_FEW rows when nt <= 2: more rows per pass for decode).
template <class Dot, int MR, int MT, int MR_FEW>
void kernel(const std::uint8_t* w, std::size_t row_bytes, int nr, const q8::BlockQ8* xq, int nt, std::int64_t cols, float* y,
            std::int64_t ys) {
  static constexpr auto many = table<Dot, MR, MT>(std::make_index_sequence<MR * MT>{});
  static constexpr auto few = table<Dot, MR_FEW, 2>(std::make_index_sequence<MR_FEW * 2>{});
  const std::int64_t nb = cols / q8::kBlock;
  const int mr = nt <= 2 ? MR_FEW : MR, mt = nt <= 2 ? 2 : MT;
  for (int r0 = 0; r0 < nr; r0 += mr) {
    const int rr = std::min(mr, nr - r0);
    for (int t0 = 0; t0 < nt; t0 += mt) {
      const int tt = std::min(mt, nt - t0);
      const TileFn f = nt <= 2 ? few[(rr - 1) * 2 + tt - 1] : many[(rr - 1) * MT + tt - 1];
      f(w + static_cast<std::size_t>(r0) * row_bytes, row_bytes, xq + t0 * nb, nb, y + t0 * ys + r0, ys);
    }
  }
}

}  // namespace tile
}  // namespace
}  // namespace mo::ops::q4z
