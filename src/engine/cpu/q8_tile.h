// The register-blocked tile kernel shared by the AVX2 and the AVX512-VNNI levels. Included once by
// q8_kernels_avx2.cpp (MO_Q8_VNNI 0) and once by q8_kernels_vnni.cpp (MO_Q8_VNNI 1), each under its own
// target pragma; everything here has internal linkage so the two builds never merge.
//
// A weight block of 32 decodes to 32 unsigned bytes u with w = dw * (u - off) - min (dw per 16-half for
// the 16-scale k-quants), the exact weights dequantize_row gives. Per (row r, token t, block) the int32
// lanes of u·x - off·sum(x) are converted to f32 and FMA'd into acc[r][t] with scale dw[r] * dx[t];
// k-quant mins are one FMA per super-block. Every tile shape (and tail) runs this same sequence for each
// (r, t), and the final 8-lane sum is one fixed function, so results never depend on nr or nt.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "q8_kernels.h"

namespace mo::ops::q8 {
namespace {

inline float f16_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
inline std::uint32_t u32_at(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

// 16 bytes of packed nibbles -> 32 bytes: the low nibbles, then the high ones.
inline __m256i nibbles16(const std::uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), bytes(0x0F));
}
// u | add where bit i of `bits` is set, for byte i.
inline __m256i add_where_bits(__m256i u, std::uint32_t bits, int add) {
#if MO_Q8_VNNI
  return _mm256_mask_add_epi8(u, static_cast<__mmask32>(bits), u, bytes(add));
#else
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  b = _mm256_cmpeq_epi8(_mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
  return _mm256_or_si256(u, _mm256_and_si256(b, bytes(add)));
#endif
}
// u | add for each byte i whose `v` byte has bit `bit` set.
inline __m256i add_where_bit(__m256i u, __m256i v, int bit, int add) {
  const __m256i m = bytes(1 << bit);
  return _mm256_or_si256(u, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, m), m), bytes(add)));
}
// (v >> S) for bytes when S > 0, (v << -S) when S < 0: 16-bit shifts; callers mask the bits they keep.
template <int S>
inline __m256i shift_bytes(__m256i v) {
  if constexpr (S > 0)
    return _mm256_srli_epi16(v, S);
  else if constexpr (S < 0)
    return _mm256_slli_epi16(v, -S);
  else
    return v;
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// Two 16-halves' scales: lanes 0-3 get a, lanes 4-7 get b (the lanes of u·x over halves 0 and 1).
inline __m256 halves(const float* ab) { return _mm256_set_m128(_mm_broadcast_ss(ab + 1), _mm_broadcast_ss(ab)); }

// Lanes 0-3: k * sum[0], lanes 4-7: k * sum[1], so the 8 lanes add up to 4k * (the half sums).
inline __m256i bias_of(const BlockQ8& x, int k) {
  std::int32_t s;
  std::memcpy(&s, x.sum, 4);
  const int lo = k & 0xFFFF, hi = static_cast<int>(static_cast<unsigned>(k) << 16);
  return _mm256_madd_epi16(_mm256_set1_epi32(s), _mm256_setr_epi32(lo, lo, lo, lo, hi, hi, hi, hi));
}

// int32 lanes of u·x (+ bias): u unsigned bytes < 128 on AVX2 (maddubs saturates beyond), any on VNNI.
template <bool kBias>
inline __m256i dot_u(__m256i u, __m256i x, __m256i bias) {
#if MO_Q8_VNNI
  return _mm256_dpbusd_epi32(kBias ? bias : _mm256_setzero_si256(), u, x);
#else
  const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
  return kBias ? _mm256_add_epi32(s, bias) : s;
#endif
}

template <int N, class F>
inline __attribute__((always_inline)) void static_for(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }
  (std::make_integer_sequence<int, N>{});
}

// Token-side mins of one super-block (8 blocks from xs): lane j = dx_j * (sum of block j).
inline __m256 block_sums(const BlockQ8* xs) {
  const __m256i idx = _mm256_setr_epi32(0, 10, 20, 30, 40, 50, 60, 70);  // BlockQ8 is 10 ints
  const __m256 d = _mm256_i32gather_ps(&xs->d, idx, 4);
  const __m256i s = _mm256_i32gather_epi32(reinterpret_cast<const int*>(xs->sum), idx, 4);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s, _mm256_set1_epi16(1))), d);
}
// Same per 16-half for 4 blocks: lane 2i + h = dx_i * sum_h of block i.
inline __m256 half_sums(const BlockQ8* xs) {
  const __m256i idx = _mm256_setr_epi32(0, 0, 10, 10, 20, 20, 30, 30);
  const __m256 d = _mm256_i32gather_ps(&xs->d, idx, 4);
  const __m256i s = _mm256_i32gather_epi32(reinterpret_cast<const int*>(xs->sum), idx, 4);
  const __m256i lo = _mm256_srai_epi32(_mm256_slli_epi32(s, 16), 16), hi = _mm256_srai_epi32(s, 16);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_blend_epi32(lo, hi, 0xAA)), d);
}

constexpr int kAhead = 2;  // tiles ahead that micro() prefetches

// The tile: MR weight rows x NR tokens, all blocks of the row. x: token t's blocks at x + t * nbx.
template <class T, int MR, int NR>
void micro(const std::uint8_t* w, std::size_t rb, const BlockQ8* x, std::int64_t nbx, float* y, std::int64_t ys) {
  __m256 acc[MR][NR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) acc[r][t] = _mm256_setzero_ps();
  const std::int64_t nsb = nbx / T::kSub;
  for (std::int64_t sb = 0; sb < nsb; ++sb) {
    typename T::Row st[MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) T::prep(w + r * rb + sb * T::kBytes, st[r]);
    {
      // The rows two tiles on, a slice per step: MR interleaved row streams defeat the hardware
      // prefetcher, so matrices bigger than the caches would otherwise stream from DRAM slowly.
      const char* p = reinterpret_cast<const char*>(w + kAhead * MR * rb + sb * MR * T::kBytes);
      for (std::size_t o = 0; o < MR * T::kBytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
    }
    const BlockQ8* xs = x + sb * T::kSub;
    if constexpr (T::kMin == 2) {
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        const __m256 xm = block_sums(xs + t * nbx);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) acc[r][t] = _mm256_fnmadd_ps(st[r].mn[0], xm, acc[r][t]);
      }
    } else if constexpr (T::kMin == 3) {
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        const __m256 xm0 = half_sums(xs + t * nbx), xm1 = half_sums(xs + t * nbx + 4);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          acc[r][t] = _mm256_fnmadd_ps(st[r].mn[0], xm0, acc[r][t]);
          acc[r][t] = _mm256_fnmadd_ps(st[r].mn[1], xm1, acc[r][t]);
        }
      }
    }
    static_for<T::kSub>([&](auto J) __attribute__((always_inline)) {
      constexpr int j = decltype(J)::value;
      __m256i wv[MR];
      __m256 dw[MR];
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        wv[r] = T::template weights<j>(st[r]);
        dw[r] = T::template scale<j>(st[r]);
      }
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        const BlockQ8& xb = xs[t * nbx + j];
        const __m256i xv = load256(xb.qs);
        const __m256 dx = _mm256_broadcast_ss(&xb.d);
        if constexpr (T::kSigned && !MO_Q8_VNNI) {
          // AVX2 Q8_0: ggml's sign trick keeps maddubs' operands in range.
#pragma GCC unroll 16
          for (int r = 0; r < MR; ++r) {
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wv[r], wv[r]), _mm256_sign_epi8(xv, wv[r]));
            const __m256i s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
            acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw[r], dx), acc[r][t]);
          }
        } else {
          const __m256i bias = T::kOff != 0 ? bias_of(xb, -T::kOff / 4) : _mm256_setzero_si256();
#pragma GCC unroll 16
          for (int r = 0; r < MR; ++r) {
            const __m256i s = dot_u<T::kOff != 0>(wv[r], xv, bias);
            acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw[r], dx), acc[r][t]);
          }
        }
        if constexpr (T::kMin == 1) {
          // Legacy w = d*q + m: m * dx * sum(x), spread evenly over the 8 lanes (x 1/8 is exact).
          const __m256 xm = _mm256_set1_ps(xb.d * (static_cast<float>(xb.sum[0] + xb.sum[1]) * 0.125f));
#pragma GCC unroll 16
          for (int r = 0; r < MR; ++r) acc[r][t] = _mm256_fmadd_ps(st[r].mn[0], xm, acc[r][t]);
        }
      }
    });
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) y[t * ys + r] = hsum(acc[r][t]);
}

using Micro = void (*)(const std::uint8_t*, std::size_t, const BlockQ8*, std::int64_t, float*, std::int64_t);

template <class T, int MR, int NR>
struct Tiles {
  static constexpr auto table = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<Micro, MR * NR>{&micro<T, I / NR + 1, I % NR + 1>...};
  }
  (std::make_integer_sequence<int, MR * NR>{});
};

// The Kernel: tokens in chunks whose activations stay in L2, rows in MR tiles (their weights stay in
// L1 while the chunk's tokens stream past NR at a time).
template <class T, int MR, int NR>
void run(const std::uint8_t* w, std::size_t rb, int nr, const BlockQ8* xq, int nt, std::int64_t cols, float* y, std::int64_t ys) {
  const std::int64_t nbx = cols / kBlock;
  const std::int64_t chunk_bytes = 192 * 1024;
  const int tc = static_cast<int>(std::max<std::int64_t>(NR, chunk_bytes / (nbx * std::int64_t{sizeof(BlockQ8)}) / NR * NR));
  const auto& tab = Tiles<T, MR, NR>::table;
  for (int t0 = 0; t0 < nt; t0 += tc) {
    const int t_end = std::min(nt, t0 + tc);
    for (int r0 = 0; r0 < nr; r0 += MR) {
      const int mr = std::min(MR, nr - r0);
      for (int t1 = t0; t1 < t_end; t1 += NR) {
        const int n = std::min(NR, t_end - t1);
        tab[(mr - 1) * NR + (n - 1)](w + static_cast<std::size_t>(r0) * rb, rb, xq + t1 * nbx, nbx, y + t1 * ys + r0, ys);
      }
    }
  }
}

}  // namespace
}  // namespace mo::ops::q8
