// Row-group kernels for the 32-weight block formats with one scale per block (Q4_0; Q8_0 on VNNI),
// included after q8_tile.h under the same target pragma. Eight weight rows are transposed so that
// register g holds inputs 4g..4g+3 of every row (lane r = row r): one dpbusd (AVX2: maddubs) with
// the token's 4 bytes broadcast adds 4 products to each row's lane, so a block's exact integer sum
// Σ (u - off)·x of all 8 rows takes 8 instructions, then one convert and one FMA with d_r·dx_t.
// A (row, token) value is Σ_blocks in order of fma(float(isum), d_r * dx_t, acc): the same for every
// tile shape, tail, and for the panel (many tokens) and fused (few tokens) paths alike.
#include <vector>

#include "mo/quant/gguf_blocks.h"

namespace mo::ops::q8 {
namespace {

// One block of 8 rows, transposed: u[g] lane r = row r's unsigned bytes for inputs 4g..4g+3.
struct alignas(32) PanelBlock {
  __m256i u[8];
  __m256 d;
  __m256 m;   // per-row mins (formats with kMin)
  __m256i z;  // per-row zero points (kZero: Q4Z)
};

// 4 x 4 dword transpose inside each 128-bit half: a[r] = (row r | row r + 4) -> out[c] = dword c of rows 0..7.
inline void transpose4(const __m256i a[4], __m256i out[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

// The 8 rows' f16 scales (at byte 0 of each block) as f32 lanes (inserted one by one: 8 small stores
// read back as one vector would stall store forwarding).
inline __m256 row_scales(const std::uint8_t* const p[8]) {
  std::uint16_t h0;
  std::memcpy(&h0, p[0], 2);
  __m128i h = _mm_cvtsi32_si128(h0);
  h = _mm_insert_epi16(h, *reinterpret_cast<const std::uint16_t*>(p[1]), 1);
  h = _mm_insert_epi16(h, *reinterpret_cast<const std::uint16_t*>(p[2]), 2);
  h = _mm_insert_epi16(h, *reinterpret_cast<const std::uint16_t*>(p[3]), 3);
  h = _mm_insert_epi16(h, *reinterpret_cast<const std::uint16_t*>(p[4]), 4);
  h = _mm_insert_epi16(h, *reinterpret_cast<const std::uint16_t*>(p[5]), 5);
  h = _mm_insert_epi16(h, *reinterpret_cast<const std::uint16_t*>(p[6]), 6);
  h = _mm_insert_epi16(h, *reinterpret_cast<const std::uint16_t*>(p[7]), 7);
  return _mm256_cvtph_ps(h);
}

// Groups g of 4 nibbles: dword c of the 16 bytes at `qs` holds inputs 4c..4c+3 (low nibbles) and
// 16 + 4c.. (high), so u[c] and u[c + 4] come from it.
inline void nibble_groups(const std::uint8_t* const p[8], int qs, __m256i u[8]) {
  __m256i a[4], c[4];
  for (int r = 0; r < 4; ++r)
    a[r] = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[r + 4] + qs)),
                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[r] + qs)));
  transpose4(a, c);
  for (int g = 0; g < 4; ++g) {
    u[g] = _mm256_and_si256(c[g], bytes(0x0F));
    u[g + 4] = _mm256_and_si256(_mm256_srli_epi16(c[g], 4), bytes(0x0F));
  }
}

// The fifth bits: bit i of the 32-bit qh at `qh` adds 16 to input i (ggml's Q5_0 / Q5_1).
inline void fifth_bits(const std::uint8_t* const p[8], int qh, __m256i u[8]) {
  const __m256i h = _mm256_setr_epi32(static_cast<int>(u32_at(p[0] + qh)), static_cast<int>(u32_at(p[1] + qh)), static_cast<int>(u32_at(p[2] + qh)),
                                      static_cast<int>(u32_at(p[3] + qh)), static_cast<int>(u32_at(p[4] + qh)), static_cast<int>(u32_at(p[5] + qh)),
                                      static_cast<int>(u32_at(p[6] + qh)), static_cast<int>(u32_at(p[7] + qh)));
  for (int g = 0; g < 8; ++g) {
    // Inputs 4g..4g+3 are bits 4(g%2)..+3 of byte g/2: that byte to all 4 bytes of its lane, then one bit each.
    const char s = static_cast<char>(g / 2);
    const __m256i idx = _mm256_setr_epi8(s, s, s, s, s + 4, s + 4, s + 4, s + 4, s + 8, s + 8, s + 8, s + 8, s + 12, s + 12, s + 12, s + 12,
                                         s, s, s, s, s + 4, s + 4, s + 4, s + 4, s + 8, s + 8, s + 8, s + 8, s + 12, s + 12, s + 12, s + 12);
    const int sh = 4 * (g % 2);
    const __m256i m = _mm256_set1_epi32(static_cast<int>((1u << sh) | (2u << sh) << 8 | (4u << sh) << 16 | (8u << sh) << 24));
    const __m256i hit = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(h, idx), m), m);
    u[g] = _mm256_or_si256(u[g], _mm256_and_si256(hit, bytes(16)));
  }
}

inline __m256 row_f16s(const std::uint8_t* const p[8], int at) {
  const std::uint8_t* q[8];
  for (int r = 0; r < 8; ++r) q[r] = p[r] + at;
  return row_scales(q);
}

// A format: kOff (w = d * (u - kOff) [+ m]; kZero: a per-row zero instead of kOff), kGroups16 (groups whose maddubs pairs may share a 16-bit
// sum: 8 for u <= 15, 4 for u <= 31; 0: dpbusd, VNNI only), kMin (a per-block f16 min is added).
struct PanelQ4_0 {
  static constexpr int kOff = 8, kGroups16 = 8;
  static constexpr bool kMin = false, kZero = false;
  static constexpr std::size_t kBytes = sizeof(mo::quant::BlockQ4_0);
  static void decode(const std::uint8_t* const p[8], PanelBlock& o) {
    nibble_groups(p, 2, o.u);
    o.d = row_scales(p);
  }
};

struct PanelQ4_1 {
  static constexpr int kOff = 0, kGroups16 = 8;
  static constexpr bool kMin = true, kZero = false;
  static constexpr std::size_t kBytes = sizeof(mo::quant::BlockQ4_1);
  static void decode(const std::uint8_t* const p[8], PanelBlock& o) {
    nibble_groups(p, 4, o.u);
    o.d = row_scales(p);
    o.m = row_f16s(p, 2);
  }
};

struct PanelQ5_0 {
  static constexpr int kOff = 16, kGroups16 = 4;
  static constexpr bool kMin = false, kZero = false;
  static constexpr std::size_t kBytes = sizeof(mo::quant::BlockQ5_0);
  static void decode(const std::uint8_t* const p[8], PanelBlock& o) {
    nibble_groups(p, 6, o.u);
    fifth_bits(p, 2, o.u);
    o.d = row_scales(p);
  }
};

struct PanelQ5_1 {
  static constexpr int kOff = 0, kGroups16 = 4;
  static constexpr bool kMin = true, kZero = false;
  static constexpr std::size_t kBytes = sizeof(mo::quant::BlockQ5_1);
  static void decode(const std::uint8_t* const p[8], PanelBlock& o) {
    nibble_groups(p, 8, o.u);
    fifth_bits(p, 4, o.u);
    o.d = row_scales(p);
    o.m = row_f16s(p, 2);
  }
};

// The engine's AWQ / GPTQ INT4 blocks (q4z.h: f16 scale, zero z, nibbles as Q4_0): offset z per row.
struct PanelQ4Z {
  static constexpr int kOff = 0, kGroups16 = 8;
  static constexpr bool kMin = false, kZero = true;
  static constexpr std::size_t kBytes = 19;  // sizeof(q4z::BlockQ4Z)
  static void decode(const std::uint8_t* const p[8], PanelBlock& o) {
    nibble_groups(p, 3, o.u);
    o.d = row_scales(p);
    o.z = _mm256_setr_epi32(p[0][2], p[1][2], p[2][2], p[3][2], p[4][2], p[5][2], p[6][2], p[7][2]);
  }
};

// Signed bytes as u = q + 128 with offset 128 (VNNI only: dpbusd takes any unsigned byte).
struct PanelQ8_0 {
  static constexpr int kOff = 128, kGroups16 = 0;
  static constexpr bool kMin = false, kZero = false;
  static constexpr std::size_t kBytes = sizeof(mo::quant::BlockQ8_0);
  static void decode(const std::uint8_t* const p[8], PanelBlock& o) {
    __m256i a[4], c[4];
    for (int half = 0; half < 2; ++half) {  // dwords 0-3, then 4-7 of each row
      for (int r = 0; r < 4; ++r)
        a[r] = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[r + 4] + 2 + 16 * half)),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[r] + 2 + 16 * half)));
      transpose4(a, c);
      for (int g = 0; g < 4; ++g) o.u[4 * half + g] = _mm256_xor_si256(c[g], bytes(0x80));
    }
    o.d = row_scales(p);
  }
};

inline __m256i bcast4(const std::int8_t* q) {
  std::int32_t v;
  std::memcpy(&v, q, 4);
  return _mm256_set1_epi32(v);
}

// acc[t] lanes += isum(block, t) * d_r * dx_t (+ m_r * dx_t * Σx_t) for the tile's NT tokens. 4- and
// 5-bit formats sum maddubs' 16-bit pairs over kGroups16 groups (exact: 8 x 2 x 15 x 127 and
// 4 x 2 x 31 x 127 < 32768) at every level, which on Zen 4 beats 8 dependent dpbusd; 8-bit takes dpbusd.
template <class P, int NT>
inline __attribute__((always_inline)) void panel_step(const PanelBlock& w, const BlockQ8* x, std::int64_t nbx, __m256 acc[NT]) {
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
    const BlockQ8& xb = x[t * nbx];
    const int sx = xb.sum[0] + xb.sum[1];
    __m256i bias;
    if constexpr (P::kZero) bias = _mm256_mullo_epi32(w.z, _mm256_set1_epi32(-sx));
    else bias = _mm256_set1_epi32(-P::kOff * sx);
    __m256i s;
    if constexpr (P::kGroups16 > 0) {
      s = bias;
#pragma GCC unroll 8
      for (int g0 = 0; g0 < 8; g0 += P::kGroups16) {
        __m256i s16 = _mm256_maddubs_epi16(w.u[g0], bcast4(xb.qs + 4 * g0));
#pragma GCC unroll 8
        for (int g = g0 + 1; g < g0 + P::kGroups16; ++g) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w.u[g], bcast4(xb.qs + 4 * g)));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
      }
    } else {
#if MO_Q8_VNNI
      // Few tokens: independent partial sums (exact integers, so the split changes no bit) hide latency.
      constexpr int kChains = NT == 1 ? 4 : NT == 2 ? 2 : 1;
      __m256i c[kChains];
      c[0] = bias;
#pragma GCC unroll 4
      for (int k = 1; k < kChains; ++k) c[k] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) c[g % kChains] = _mm256_dpbusd_epi32(c[g % kChains], w.u[g], bcast4(xb.qs + 4 * g));
      s = c[0];
#pragma GCC unroll 4
      for (int k = 1; k < kChains; ++k) s = _mm256_add_epi32(s, c[k]);
#else
      static_assert(P::kGroups16 > 0, "bytes above 31 need VNNI");
#endif
    }
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(w.d, _mm256_set1_ps(xb.d)), acc[t]);
    if constexpr (P::kMin) acc[t] = _mm256_fmadd_ps(w.m, _mm256_set1_ps(xb.d * static_cast<float>(sx)), acc[t]);
  }
}

// Lanes 0..nr-1 of v to y[0..nr).
inline void store_rows(float* y, __m256 v, int nr) {
  if (nr == 8) {
    _mm256_storeu_ps(y, v);
  } else {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(y, m, v);
  }
}

// NT tokens against blocks that `block(b)` yields (a panel, or decoded on the fly).
template <class P, int NT, class Blocks>
inline __attribute__((always_inline)) void panel_tile(Blocks&& block, std::int64_t nb, const BlockQ8* x, std::int64_t nbx, float* y,
                                                      std::int64_t ys, int nr) {
  __m256 acc[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) panel_step<P, NT>(block(b), x + b, nbx, acc);
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) store_rows(y + t * ys, acc[t], nr);
}

template <class P, int NT>
void panel_from(const PanelBlock* panel, std::int64_t nb, const BlockQ8* x, std::int64_t nbx, float* y, std::int64_t ys, int nr) {
  panel_tile<P, NT>([panel](std::int64_t b) -> const PanelBlock& { return panel[b]; }, nb, x, nbx, y, ys, nr);
}

// Few tokens: each block decoded straight into registers, the rows prefetched a few blocks ahead.
// `ahead`: the rows two groups on, prefetched a slice per block (8 interleaved row streams defeat
// the hardware prefetcher; those rows are contiguous, so one linear walk covers them).
template <class P, int NT>
void fused(const std::uint8_t* const rows[8], const std::uint8_t* ahead, std::int64_t nb, const BlockQ8* x, std::int64_t nbx, float* y,
           std::int64_t ys, int nr) {
  PanelBlock blk;
  auto block = [&](std::int64_t b) -> const PanelBlock& {
    const char* pf = reinterpret_cast<const char*>(ahead + b * 8 * P::kBytes);
    for (std::size_t o = 0; o < 8 * P::kBytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
    const std::uint8_t* p[8];
    for (int r = 0; r < 8; ++r) p[r] = rows[r] + b * P::kBytes;
    P::decode(p, blk);
    return blk;
  };
  panel_tile<P, NT>(block, nb, x, nbx, y, ys, nr);
}

template <class P, int NT>
struct PanelTiles {
  using FromPanel = void (*)(const PanelBlock*, std::int64_t, const BlockQ8*, std::int64_t, float*, std::int64_t, int);
  using Fused = void (*)(const std::uint8_t* const*, const std::uint8_t*, std::int64_t, const BlockQ8*, std::int64_t, float*, std::int64_t,
                         int);
  static constexpr auto from_panel = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<FromPanel, NT>{&panel_from<P, I + 1>...};
  }(std::make_integer_sequence<int, NT>{});
  static constexpr auto fused_tab = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<Fused, NT>{&fused<P, I + 1>...};
  }(std::make_integer_sequence<int, NT>{});
};

// The Kernel (q8.h contract): rows in groups of 8 (a short last group repeats its last row and stores
// only its own lanes); per group, up to NT tokens decode each block into registers, more tokens first
// transpose the group's blocks into a panel that every NT-token tile then reads.
template <class P, int NT>
void run_panel(const std::uint8_t* w, std::size_t rb, int nr, const BlockQ8* xq, int nt, std::int64_t cols, float* y, std::int64_t ys) {
  const std::int64_t nb = cols / kBlock;
  thread_local std::vector<PanelBlock> panel;
  if (nt > NT && static_cast<std::int64_t>(panel.size()) < nb) panel.resize(static_cast<std::size_t>(nb));
  // Tokens in chunks whose activations stay in L2 while the row groups pass.
  const int tc = static_cast<int>(std::max<std::int64_t>(NT, 192 * 1024 / (nb * std::int64_t{sizeof(BlockQ8)}) / NT * NT));
  for (int t0 = 0; t0 < nt; t0 += tc) {
    const int t_end = std::min(nt, t0 + tc);
    for (int r0 = 0; r0 < nr; r0 += 8) {
      const int n_rows = std::min(8, nr - r0);
      const std::uint8_t* rows[8];
      for (int r = 0; r < 8; ++r) rows[r] = w + static_cast<std::size_t>(r0 + std::min(r, n_rows - 1)) * rb;
      if (t_end - t0 <= NT) {
        PanelTiles<P, NT>::fused_tab[t_end - t0 - 1](rows, w + static_cast<std::size_t>(r0 + 16) * rb, nb, xq + t0 * nb, nb, y + t0 * ys + r0, ys, n_rows);
        continue;
      }
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::uint8_t* p[8];
        for (int r = 0; r < 8; ++r) p[r] = rows[r] + b * P::kBytes;
        P::decode(p, panel[b]);
      }
      for (int t1 = t0; t1 < t_end; t1 += NT) {
        const int n = std::min(NT, t_end - t1);
        PanelTiles<P, NT>::from_panel[n - 1](panel.data(), nb, xq + t1 * nb, nb, y + t1 * ys + r0, ys, n_rows);
      }
    }
  }
}

}  // namespace
}  // namespace mo::ops::q8
