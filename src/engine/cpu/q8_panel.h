// Row-group kernels for Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, the AWQ/GPTQ Q4Z blocks and (VNNI)
// Q8_0, included after q8_tile.h and q8_types.h under the same target pragma. Eight weight rows are transposed so that
// register g holds inputs 4g..4g+3 of every row (lane r = row r): one dpbusd (AVX2: maddubs) with
// the token's 4 bytes broadcast adds 4 products to each row's lane, so a block's exact integer sum
// Σ (u - off)·x of all 8 rows takes 8 instructions, then one convert and one FMA with d_r·dx_t
// (k-quants: per sub-block of 32, Q6_K per 16).
// A (row, token) value is Σ_blocks in order of fma(float(isum), d_r * dx_t, acc): the same for every
// tile shape, tail, and for the panel (many tokens) and fused (few tokens) paths alike.
#include <vector>

namespace mo::ops::q8 {
namespace {

// One block of 8 rows, transposed: u[g] lane r = row r's unsigned bytes for inputs 4g..4g+3.
struct alignas(32) PanelBlock {
  __m256i u[8];
  __m256 d;   // per-row scales (kHalves: of inputs 0-15)
  __m256 d2;  // kHalves: per-row scales of inputs 16-31
  __m256 m;   // per-row mins, added (formats with kMin)
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

inline int u16_at(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The 8 rows' f16 scales (at byte 0 of each block) as f32 lanes (inserted one by one: 8 small stores
// read back as one vector would stall store forwarding).
inline __m256 row_scales(const std::uint8_t* const p[8]) {
  __m128i h = _mm_cvtsi32_si128(u16_at(p[0]));
  h = _mm_insert_epi16(h, u16_at(p[1]), 1);
  h = _mm_insert_epi16(h, u16_at(p[2]), 2);
  h = _mm_insert_epi16(h, u16_at(p[3]), 3);
  h = _mm_insert_epi16(h, u16_at(p[4]), 4);
  h = _mm_insert_epi16(h, u16_at(p[5]), 5);
  h = _mm_insert_epi16(h, u16_at(p[6]), 6);
  h = _mm_insert_epi16(h, u16_at(p[7]), 7);
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
  const __m256i h =
      _mm256_setr_epi32(static_cast<int>(u32_at(p[0] + qh)), static_cast<int>(u32_at(p[1] + qh)), static_cast<int>(u32_at(p[2] + qh)),
                        static_cast<int>(u32_at(p[3] + qh)), static_cast<int>(u32_at(p[4] + qh)), static_cast<int>(u32_at(p[5] + qh)),
                        static_cast<int>(u32_at(p[6] + qh)), static_cast<int>(u32_at(p[7] + qh)));
  for (int g = 0; g < 8; ++g) {
    // Inputs 4g..4g+3 are bits 4(g%2)..+3 of byte g/2: that byte to all 4 bytes of its lane, then one bit each.
    const char s = static_cast<char>(g / 2);
    const __m256i idx =
        _mm256_setr_epi8(s, s, s, s, s + 4, s + 4, s + 4, s + 4, s + 8, s + 8, s + 8, s + 8, s + 12, s + 12, s + 12, s + 12, s, s, s, s,
                         s + 4, s + 4, s + 4, s + 4, s + 8, s + 8, s + 8, s + 8, s + 12, s + 12, s + 12, s + 12);
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

// A format: kOff (w = d * (u - kOff) [+ m]; kZero: a per-row zero instead of kOff), kGroups16 (groups whose maddubs pairs may share a
// 16-bit sum: 8 for u <= 15, 4 for u <= 31; 0: dpbusd, VNNI only), kMin (a per-block f16 min is added).
struct PanelQ4_0 {
  static constexpr int kOff = 8, kGroups16 = 8;
  static constexpr int kSub = 1;
  static constexpr bool kMin = false, kZero = false, kHalves = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ4_0);
  static void decode(const std::uint8_t* const p[8], PanelBlock* out) {
    PanelBlock& o = *out;
    nibble_groups(p, 2, o.u);
    o.d = row_scales(p);
  }
};

struct PanelQ4_1 {
  static constexpr int kOff = 0, kGroups16 = 8;
  static constexpr int kSub = 1;
  static constexpr bool kMin = true, kZero = false, kHalves = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ4_1);
  static void decode(const std::uint8_t* const p[8], PanelBlock* out) {
    PanelBlock& o = *out;
    nibble_groups(p, 4, o.u);
    o.d = row_scales(p);
    o.m = row_f16s(p, 2);
  }
};

struct PanelQ5_0 {
  static constexpr int kOff = 16, kGroups16 = 4;
  static constexpr int kSub = 1;
  static constexpr bool kMin = false, kZero = false, kHalves = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ5_0);
  static void decode(const std::uint8_t* const p[8], PanelBlock* out) {
    PanelBlock& o = *out;
    nibble_groups(p, 6, o.u);
    fifth_bits(p, 2, o.u);
    o.d = row_scales(p);
  }
};

struct PanelQ5_1 {
  static constexpr int kOff = 0, kGroups16 = 4;
  static constexpr int kSub = 1;
  static constexpr bool kMin = true, kZero = false, kHalves = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ5_1);
  static void decode(const std::uint8_t* const p[8], PanelBlock* out) {
    PanelBlock& o = *out;
    nibble_groups(p, 8, o.u);
    fifth_bits(p, 4, o.u);
    o.d = row_scales(p);
    o.m = row_f16s(p, 2);
  }
};

// The engine's AWQ / GPTQ INT4 blocks (q4z.h: f16 scale, zero z, nibbles as Q4_0): offset z per row.
struct PanelQ4Z {
  static constexpr int kOff = 0, kGroups16 = 8;
  static constexpr int kSub = 1;
  static constexpr bool kMin = false, kZero = true, kHalves = false;
  static constexpr std::size_t kBytes = 19;  // sizeof(q4z::BlockQ4Z)
  static void decode(const std::uint8_t* const p[8], PanelBlock* out) {
    PanelBlock& o = *out;
    nibble_groups(p, 3, o.u);
    o.d = row_scales(p);
    o.z = _mm256_setr_epi32(p[0][2], p[1][2], p[2][2], p[3][2], p[4][2], p[5][2], p[6][2], p[7][2]);
  }
};

// Signed bytes as u = q + 128 with offset 128 (VNNI only: dpbusd takes any unsigned byte).
struct PanelQ8_0 {
  static constexpr int kOff = 128, kGroups16 = 0;
  static constexpr int kSub = 1;
  static constexpr bool kMin = false, kZero = false, kHalves = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ8_0);
  static void decode(const std::uint8_t* const p[8], PanelBlock* out) {
    PanelBlock& o = *out;
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

// 8 x 8 f32 transpose: v[r] lane j -> v[j] lane r.
inline void transpose8(__m256 v[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// The 32 bytes at offset `at` of the 8 rows, transposed: out[g] lane r = dword g of row r.
inline void transpose_bytes32(const std::uint8_t* const p[8], int at, __m256i out[8]) {
  for (int h = 0; h < 2; ++h) {
    __m256i a[4];
    for (int r = 0; r < 4; ++r)
      a[r] = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[r + 4] + at + 16 * h)),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[r] + at + 16 * h)));
    transpose4(a, out + 4 * h);
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32 per super-block with 6-bit scales and mins (k4_scales, as ggml);
// sub-block 2i is the low nibbles of qs[32i ..], 2i + 1 the high ones; Q5_K adds bit j of qh[e] x 16.
inline void k4_panel_scales(const std::uint8_t* const p[8], PanelBlock* o) {
  __m256 sc[8], mn[8];
  for (int r = 0; r < 8; ++r) k4_scales(p[r], sc[r], mn[r]);
  transpose8(sc);
  transpose8(mn);
  for (int j = 0; j < 8; ++j) {
    o[j].d = sc[j];
    o[j].m = _mm256_xor_ps(mn[j], _mm256_set1_ps(-0.0f));  // w = d·sc·q - dmin·m: the min is subtracted
  }
}

template <bool kFifth>
inline void decode_k4(const std::uint8_t* const p[8], PanelBlock* o) {
  k4_panel_scales(p, o);
  __m256i qh[8];
  if constexpr (kFifth) transpose_bytes32(p, 16, qh);
  for (int i = 0; i < 4; ++i) {
    __m256i c[8];
    transpose_bytes32(p, kFifth ? 48 + 32 * i : 16 + 32 * i, c);
    for (int g = 0; g < 8; ++g) {
      o[2 * i].u[g] = _mm256_and_si256(c[g], bytes(0x0F));
      o[2 * i + 1].u[g] = _mm256_and_si256(_mm256_srli_epi16(c[g], 4), bytes(0x0F));
    }
  }
  for (int j = 0; j < 8; ++j) {
    if constexpr (kFifth)
      for (int g = 0; g < 8; ++g)
        o[j].u[g] = _mm256_or_si256(o[j].u[g], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[g], j), bytes(1)), 4));
  }
}

struct PanelQ4_K {
  static constexpr int kOff = 0, kGroups16 = 8, kSub = 8;
  static constexpr bool kMin = true, kZero = false, kHalves = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ4_K);
  using Tile = Q4_K;  // its rows' bytes in input order, for rowwise()
  static void scales(const std::uint8_t* const p[8], PanelBlock* o) { k4_panel_scales(p, o); }
  static void decode(const std::uint8_t* const p[8], PanelBlock* o) { decode_k4<false>(p, o); }
};

struct PanelQ5_K {
  static constexpr int kOff = 0, kGroups16 = 4, kSub = 8;
  static constexpr bool kMin = true, kZero = false, kHalves = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ5_K);
  using Tile = Q5_K;
  static void scales(const std::uint8_t* const p[8], PanelBlock* o) { k4_panel_scales(p, o); }
  static void decode(const std::uint8_t* const p[8], PanelBlock* o) { decode_k4<true>(p, o); }
};

// Q6_K: sub-block j = 4h + g is the low (g < 2) or high nibbles of ql[64h + 32(g%2) ..] with bits
// 2g..2g+1 of qh[32h ..] on top, offset 32; one int8 scale per 16 inputs (kHalves), times d.
struct PanelQ6_K {
  static constexpr int kOff = 32, kGroups16 = 2, kSub = 8;
  static constexpr bool kMin = false, kZero = false, kHalves = true;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ6_K);
  static void decode(const std::uint8_t* const p[8], PanelBlock* o) {
    __m256 lo[8], hi[8];
    for (int r = 0; r < 8; ++r) {
      const __m256 d = _mm256_set1_ps(f16_at(p[r] + 208));
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[r] + 192));
      lo[r] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
      hi[r] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), d);
    }
    transpose8(lo);  // lo[k] lane r: scale k of row r (k < 8); hi[k]: scale 8 + k
    transpose8(hi);
    for (int h = 0; h < 2; ++h) {
      __m256i qh[8];
      transpose_bytes32(p, 128 + 32 * h, qh);
      for (int half = 0; half < 2; ++half) {
        __m256i ql[8];
        transpose_bytes32(p, 64 * h + 32 * half, ql);
        for (int nib = 0; nib < 2; ++nib) {
          const int g = half + 2 * nib, j = 4 * h + g;
          for (int k = 0; k < 8; ++k) {
            const __m256i l4 = _mm256_and_si256(nib ? _mm256_srli_epi16(ql[k], 4) : ql[k], bytes(0x0F));
            const int sh = 2 * g - 4;  // bits 2g..2g+1 of qh to bits 4..5
            const __m256i h2 = sh > 0 ? _mm256_srli_epi16(qh[k], sh) : sh < 0 ? _mm256_slli_epi16(qh[k], -sh) : qh[k];
            o[j].u[k] = _mm256_or_si256(l4, _mm256_and_si256(h2, bytes(0x30)));
          }
          o[j].d = (2 * j < 8) ? lo[2 * j] : hi[2 * j - 8];
          o[j].d2 = (2 * j + 1 < 8) ? lo[2 * j + 1] : hi[2 * j + 1 - 8];
        }
      }
    }
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
    if constexpr (P::kHalves) {
      // Inputs 0-15 (groups 0-3) and 16-31 each with their own scale.
      __m256i s[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        s[h] = _mm256_set1_epi32(-P::kOff * xb.sum[h]);
#pragma GCC unroll 8
        for (int g0 = 4 * h; g0 < 4 * h + 4; g0 += P::kGroups16) {
          __m256i s16 = _mm256_maddubs_epi16(w.u[g0], bcast4(xb.qs + 4 * g0));
#pragma GCC unroll 8
          for (int g = g0 + 1; g < g0 + P::kGroups16; ++g) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w.u[g], bcast4(xb.qs + 4 * g)));
          s[h] = _mm256_add_epi32(s[h], _mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
        }
      }
      const __m256 dx = _mm256_set1_ps(xb.d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[0]), _mm256_mul_ps(w.d, dx), acc[t]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[1]), _mm256_mul_ps(w.d2, dx), acc[t]);
      continue;
    }
    __m256i bias;
    if constexpr (P::kZero)
      bias = _mm256_mullo_epi32(w.z, _mm256_set1_epi32(-sx));
    else
      bias = _mm256_set1_epi32(-P::kOff * sx);
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
  for (std::int64_t sb = 0; sb < nb / P::kSub; ++sb) {
    const PanelBlock* blk = block(sb);
#pragma GCC unroll 8
    for (int j = 0; j < P::kSub; ++j) panel_step<P, NT>(blk[j], x + sb * P::kSub + j, nbx, acc);
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) store_rows(y + t * ys, acc[t], nr);
}

template <class P, int NT>
void panel_from(const PanelBlock* panel, std::int64_t nb, const BlockQ8* x, std::int64_t nbx, float* y, std::int64_t ys, int nr) {
  panel_tile<P, NT>([panel](std::int64_t sb) { return panel + sb * P::kSub; }, nb, x, nbx, y, ys, nr);
}

// Few tokens: each block decoded straight into registers, the rows prefetched a few blocks ahead.
// `ahead`: the rows one group on, prefetched a slice per block (8 interleaved row streams defeat
// the hardware prefetcher; those rows are contiguous, so one linear walk covers them).
template <class P, int NT>
void fused(const std::uint8_t* const rows[8], const std::uint8_t* ahead, std::int64_t nb, const BlockQ8* x, std::int64_t nbx, float* y,
           std::int64_t ys, int nr) {
  PanelBlock blk[P::kSub];
  auto block = [&](std::int64_t sb) -> const PanelBlock* {
    const char* pf = reinterpret_cast<const char*>(ahead + sb * 8 * P::kBytes);
    for (std::size_t o = 0; o < 8 * P::kBytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
    const std::uint8_t* p[8];
    for (int r = 0; r < 8; ++r) p[r] = rows[r] + sb * P::kBytes;
    P::decode(p, blk);
    return blk;
  };
  panel_tile<P, NT>(block, nb, x, nbx, y, ys, nr);
}

// Lane r = the sum of v[r]'s 8 lanes: exact integer adds.
inline __m256i reduce_rows(const __m256i v[8]) {
  const __m256i a = _mm256_hadd_epi32(v[0], v[1]), b = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i c = _mm256_hadd_epi32(v[4], v[5]), d = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i e = _mm256_hadd_epi32(a, b), f = _mm256_hadd_epi32(c, d);  // each half: rows' sums over that half
  return _mm256_add_epi32(_mm256_permute2x128_si256(e, f, 0x20), _mm256_permute2x128_si256(e, f, 0x31));
}

// int32 lane k = Σ u·x over bytes 4k..4k+3 (exact: u < 32, so maddubs cannot saturate on AVX2).
inline __m256i dot_row(__m256i u, __m256i x) {
#if MO_Q8_VNNI
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
#endif
}

// Q4_K / Q5_K (formats with a Tile), one token: each row's bytes dotted in input order and the 8 rows' sums
// gathered into lanes by an add tree, with no transposed copy of the weights. The integer sums are exact
// and every f32 step is panel_step's, so the bits are the panel's. It pays where transposing costs most
// (Q4_K, one token, 8192x2048 in cache, AVX2: 47-50 -> 55-76 GFLOP/s); on the 32-blocks of Q4_0 and
// on Q6_K the transposes cost less than its add tree (measured slower or level).
template <class P, int NT>
void rowwise(const std::uint8_t* const rows[8], const std::uint8_t* ahead, std::int64_t nb, const BlockQ8* x, std::int64_t nbx, float* y,
             std::int64_t ys, int nr) {
  static_assert(P::kMin && P::kOff == 0 && !P::kZero && !P::kHalves, "the Q4_K / Q5_K arithmetic of panel_step");
  __m256 acc[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  PanelBlock sc[P::kSub];
  for (std::int64_t sb = 0; sb < nb / P::kSub; ++sb) {
    const char* pf = reinterpret_cast<const char*>(ahead + sb * 8 * P::kBytes);
    for (std::size_t o = 0; o < 8 * P::kBytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
    const std::uint8_t* p[8];
    for (int r = 0; r < 8; ++r) p[r] = rows[r] + sb * P::kBytes;
    P::scales(p, sc);
    static_for<P::kSub>([&](auto J) __attribute__((always_inline)) {
      constexpr int j = decltype(J)::value;
      __m256i u[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) {
        typename P::Tile::Row row;
        row.p = p[r];  // weights<J> reads only the row's bytes
        u[r] = P::Tile::template weights<j>(row);
      }
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
        const BlockQ8& xb = x[t * nbx + sb * P::kSub + j];
        const __m256i xv = load256(xb.qs);
        __m256i s[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) s[r] = dot_row(u[r], xv);
        const int sx = xb.sum[0] + xb.sum[1];
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce_rows(s)), _mm256_mul_ps(sc[j].d, _mm256_set1_ps(xb.d)), acc[t]);
        acc[t] = _mm256_fmadd_ps(sc[j].m, _mm256_set1_ps(xb.d * static_cast<float>(sx)), acc[t]);
      }
    });
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) store_rows(y + t * ys, acc[t], nr);
}

template <class P, int NT>
struct PanelTiles {
  using FromPanel = void (*)(const PanelBlock*, std::int64_t, const BlockQ8*, std::int64_t, float*, std::int64_t, int);
  using Fused = void (*)(const std::uint8_t* const*, const std::uint8_t*, std::int64_t, const BlockQ8*, std::int64_t, float*, std::int64_t,
                         int);
  static constexpr auto from_panel = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<FromPanel, NT>{&panel_from<P, I + 1>...};
  }
  (std::make_integer_sequence<int, NT>{});
  static constexpr auto fused_tab = []<int... I>(std::integer_sequence<int, I...>) { return std::array<Fused, NT>{&fused<P, I + 1>...}; }
  (std::make_integer_sequence<int, NT>{});
};

// Rows ahead that fused() prefetches: one group, so the prefetched lines (8 rows of up to 8 KB for large
// K-quant rows, 2 KB of Q8_0 at 2048 inputs) are still in L1 when the next group reads them.
constexpr int kAheadRows = 8;

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
        const std::uint8_t* ahead = w + static_cast<std::size_t>(r0 + kAheadRows) * rb;
        if constexpr (requires { typename P::Tile; }) {
          if (t_end - t0 == 1) {
            rowwise<P, 1>(rows, ahead, nb, xq + t0 * nb, nb, y + t0 * ys + r0, ys, n_rows);
            continue;
          }
        }
        PanelTiles<P, NT>::fused_tab[t_end - t0 - 1](rows, ahead, nb, xq + t0 * nb, nb, y + t0 * ys + r0, ys, n_rows);
        continue;
      }
      for (std::int64_t sb = 0; sb < nb / P::kSub; ++sb) {
        const std::uint8_t* p[8];
        for (int r = 0; r < 8; ++r) p[r] = rows[r] + sb * P::kBytes;
        P::decode(p, panel.data() + sb * P::kSub);
      }
      for (int t1 = t0; t1 < t_end; t1 += NT) {
        const int n = std::min(NT, t_end - t1);
        PanelTiles<P, NT>::from_panel[n - 1](panel.data(), nb, xq + t1 * nb, nb, y + t1 * ys + r0, ys, n_rows);
      }
    }
  }
}

// The Kernel for ggml type `type`: row groups of 8 x NT tokens (above) unless `panel` is off (or the
// format has none: Q2_K, Q3_K; Q8_0 without VNNI), else q8_tile.h's MR x NR tiles; nullptr for others.
template <int MR, int NR, int NT>
Kernel kernel_for(std::uint32_t type, bool panel) {
  switch (type) {
    case 2: return panel ? run_panel<PanelQ4_0, NT> : run<Q4_0, MR, NR>;
    case 3: return panel ? run_panel<PanelQ4_1, NT> : run<Q4_1, MR, NR>;
    case 6: return panel ? run_panel<PanelQ5_0, NT> : run<Q5_0, MR, NR>;
    case 7: return panel ? run_panel<PanelQ5_1, NT> : run<Q5_1, MR, NR>;
    case 8:
      if constexpr (MO_Q8_VNNI) return panel ? run_panel<PanelQ8_0, NT> : run<Q8_0, MR, NR>;
      return run<Q8_0, MR, NR>;
    case 10: return run<Q2_K, MR, NR>;
    case 11: return run<Q3_K, MR, NR>;
    case 12: return panel ? run_panel<PanelQ4_K, NT> : run<Q4_K, MR, NR>;
    case 13: return panel ? run_panel<PanelQ5_K, NT> : run<Q5_K, MR, NR>;
    case 14: return panel ? run_panel<PanelQ6_K, NT> : run<Q6_K, MR, NR>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace mo::ops::q8
