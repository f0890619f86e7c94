// Weight-format decoders for q8_tile.h (included right after it, under the same target pragma). Each
// gives, per block j of a weight super-block (kSub blocks of 32): the 32 unsigned bytes u, the scale
// vector dw (8 lanes: lanes 0-3 for weights 0-15, 4-7 for 16-31) and the offset kOff with
// w = dw * (u - kOff) - min, exactly as mo::gguf::dequantize_row decodes them. kMin: 0 none,
// 1 per-block f16 min (legacy, added), 2 one min per block of 32 (k-quants), 3 one per 16 (Q2_K).
#include "mo/formats/gguf_blocks.h"

namespace mo::ops::q8 {
namespace {

using namespace mo::formats;

struct Q4_0 {
  static constexpr int kSub = 1, kOff = 8, kMin = 0;
  static constexpr bool kSigned = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ4_0);
  struct Row {
    const std::uint8_t* p;
    __m256 d;
  };
  static void prep(const std::uint8_t* p, Row& s) { s = {p, _mm256_set1_ps(f16_at(p))}; }
  template <int J>
  static __m256i weights(const Row& s) {
    return nibbles16(s.p + 2);
  }
  template <int J>
  static __m256 scale(const Row& s) {
    return s.d;
  }
};

struct Q4_1 {
  static constexpr int kSub = 1, kOff = 0, kMin = 1;
  static constexpr bool kSigned = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ4_1);
  struct Row {
    const std::uint8_t* p;
    __m256 d;
    __m256 mn[1];
  };
  static void prep(const std::uint8_t* p, Row& s) { s = {p, _mm256_set1_ps(f16_at(p)), {_mm256_set1_ps(f16_at(p + 2))}}; }
  template <int J>
  static __m256i weights(const Row& s) {
    return nibbles16(s.p + 4);
  }
  template <int J>
  static __m256 scale(const Row& s) {
    return s.d;
  }
};

struct Q5_0 {
  static constexpr int kSub = 1, kOff = 16, kMin = 0;
  static constexpr bool kSigned = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ5_0);
  struct Row {
    const std::uint8_t* p;
    __m256 d;
  };
  static void prep(const std::uint8_t* p, Row& s) { s = {p, _mm256_set1_ps(f16_at(p))}; }
  template <int J>
  static __m256i weights(const Row& s) {
    return add_where_bits(nibbles16(s.p + 6), u32_at(s.p + 2), 16);
  }
  template <int J>
  static __m256 scale(const Row& s) {
    return s.d;
  }
};

struct Q5_1 {
  static constexpr int kSub = 1, kOff = 0, kMin = 1;
  static constexpr bool kSigned = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ5_1);
  struct Row {
    const std::uint8_t* p;
    __m256 d;
    __m256 mn[1];
  };
  static void prep(const std::uint8_t* p, Row& s) { s = {p, _mm256_set1_ps(f16_at(p)), {_mm256_set1_ps(f16_at(p + 2))}}; }
  template <int J>
  static __m256i weights(const Row& s) {
    return add_where_bits(nibbles16(s.p + 8), u32_at(s.p + 4), 16);
  }
  template <int J>
  static __m256 scale(const Row& s) {
    return s.d;
  }
};

// VNNI: u = q + 128 with offset 128 (dpbusd takes any u8). AVX2: signed q through the sign trick.
struct Q8_0 {
  static constexpr int kSub = 1, kOff = MO_Q8_VNNI ? 128 : 0, kMin = 0;
  static constexpr bool kSigned = true;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ8_0);
  struct Row {
    const std::uint8_t* p;
    __m256 d;
  };
  static void prep(const std::uint8_t* p, Row& s) { s = {p, _mm256_set1_ps(f16_at(p))}; }
  template <int J>
  static __m256i weights(const Row& s) {
    const __m256i q = load256(s.p + 2);
    return MO_Q8_VNNI ? _mm256_xor_si256(q, bytes(0x80)) : q;
  }
  template <int J>
  static __m256 scale(const Row& s) {
    return s.d;
  }
};

// Q4_K / Q5_K scales and mins: ggml's unpacking of the 12 bytes into 8 scales then 8 mins.
inline void k4_scales(const std::uint8_t* p, __m256& sc, __m256& mn) {
  std::uint32_t u[4];
  std::memcpy(u, p + 4, 12);
  constexpr std::uint32_t m1 = 0x3f3f3f3f, m2 = 0x0f0f0f0f, m3 = 0x03030303;
  u[3] = ((u[2] >> 4) & m2) | (((u[1] >> 6) & m3) << 4);
  const std::uint32_t a = u[1] & m1;
  u[1] = (u[2] & m2) | (((u[0] >> 6) & m3) << 4);
  u[2] = a;
  u[0] &= m1;
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u));
  sc = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)), _mm256_set1_ps(f16_at(p)));
  mn = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))), _mm256_set1_ps(f16_at(p + 2)));
}

struct Q4_K {
  static constexpr int kSub = 8, kOff = 0, kMin = 2;
  static constexpr bool kSigned = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ4_K);
  struct Row {
    const std::uint8_t* p;
    __m256 mn[1];
    alignas(32) float sc[8];
  };
  static void prep(const std::uint8_t* p, Row& s) {
    __m256 sc;
    s.p = p;
    k4_scales(p, sc, s.mn[0]);
    _mm256_store_ps(s.sc, sc);
  }
  template <int J>
  static __m256i weights(const Row& s) {
    const __m256i q = load256(s.p + 16 + 32 * (J / 2));
    return _mm256_and_si256(shift_bytes < J % 2 ? 4 : 0 > (q), bytes(0x0F));
  }
  template <int J>
  static __m256 scale(const Row& s) {
    return _mm256_broadcast_ss(s.sc + J);
  }
};

struct Q5_K {
  static constexpr int kSub = 8, kOff = 0, kMin = 2;
  static constexpr bool kSigned = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ5_K);
  struct Row {
    const std::uint8_t* p;
    __m256 mn[1];
    alignas(32) float sc[8];
  };
  static void prep(const std::uint8_t* p, Row& s) {
    __m256 sc;
    s.p = p;
    k4_scales(p, sc, s.mn[0]);
    _mm256_store_ps(s.sc, sc);
  }
  template <int J>
  static __m256i weights(const Row& s) {
    const __m256i q = load256(s.p + 48 + 32 * (J / 2));
    const __m256i lo = _mm256_and_si256(shift_bytes < J % 2 ? 4 : 0 > (q), bytes(0x0F));
    return add_where_bit(lo, load256(s.p + 16), J, 16);
  }
  template <int J>
  static __m256 scale(const Row& s) {
    return _mm256_broadcast_ss(s.sc + J);
  }
};

// Block j = 4h + g of a Q6_K: low nibbles of ql[64h + 32(g%2) ..] (g < 2) or high (g >= 2), and bits
// 2g..2g+1 of qh[32h ..] on top; scales 2j, 2j+1 for its halves.
struct Q6_K {
  static constexpr int kSub = 8, kOff = 32, kMin = 0;
  static constexpr bool kSigned = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ6_K);
  struct Row {
    const std::uint8_t* p;
    alignas(32) float sc[16];
  };
  static void prep(const std::uint8_t* p, Row& s) {
    s.p = p;
    const __m256 d = _mm256_set1_ps(f16_at(p + 208));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192));
    _mm256_store_ps(s.sc, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
    _mm256_store_ps(s.sc + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), d));
  }
  template <int J>
  static __m256i weights(const Row& s) {
    constexpr int h = J / 4, g = J % 4;
    const __m256i ql = load256(s.p + 64 * h + 32 * (g % 2));
    const __m256i lo = _mm256_and_si256(shift_bytes < g < 2 ? 0 : 4 > (ql), bytes(0x0F));
    const __m256i hi = _mm256_and_si256(shift_bytes<2 * g - 4>(load256(s.p + 128 + 32 * h)), bytes(0x30));
    return _mm256_or_si256(lo, hi);
  }
  template <int J>
  static __m256 scale(const Row& s) {
    return halves(s.sc + 2 * J);
  }
};

// Block j = 4h + g of a Q3_K: bits 2g..2g+1 of qs[32h ..], plus 4 where bit j of hmask is set; offset 4.
struct Q3_K {
  static constexpr int kSub = 8, kOff = 4, kMin = 0;
  static constexpr bool kSigned = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ3_K);
  struct Row {
    const std::uint8_t* p;
    alignas(32) float sc[16];
  };
  static void prep(const std::uint8_t* p, Row& s) {
    s.p = p;
    const __m256 d = _mm256_set1_ps(f16_at(p + 108));
    const __m128i q = _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q3k_scales(p + 96))), _mm_set1_epi8(32));
    _mm256_store_ps(s.sc, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
    _mm256_store_ps(s.sc + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), d));
  }
  template <int J>
  static __m256i weights(const Row& s) {
    constexpr int h = J / 4, g = J % 4;
    const __m256i lo = _mm256_and_si256(shift_bytes<2 * g>(load256(s.p + 32 + 32 * h)), bytes(3));
    return add_where_bit(lo, load256(s.p), J, 4);
  }
  template <int J>
  static __m256 scale(const Row& s) {
    return halves(s.sc + 2 * J);
  }
};

// Block j = 4h + g of a Q2_K: bits 2g..2g+1 of qs[32h ..]; 4-bit scale and min per 16.
struct Q2_K {
  static constexpr int kSub = 8, kOff = 0, kMin = 3;
  static constexpr bool kSigned = false;
  static constexpr std::size_t kBytes = sizeof(formats::BlockQ2_K);
  struct Row {
    const std::uint8_t* p;
    __m256 mn[2];
    alignas(32) float sc[16];
  };
  static void prep(const std::uint8_t* p, Row& s) {
    s.p = p;
    const __m256 d = _mm256_set1_ps(f16_at(p + 80)), dmin = _mm256_set1_ps(f16_at(p + 82));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i lo = _mm_and_si128(q, _mm_set1_epi8(0x0F)), hi = _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0x0F));
    _mm256_store_ps(s.sc, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), d));
    _mm256_store_ps(s.sc + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), d));
    s.mn[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), dmin);
    s.mn[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), dmin);
  }
  template <int J>
  static __m256i weights(const Row& s) {
    constexpr int h = J / 4, g = J % 4;
    return _mm256_and_si256(shift_bytes<2 * g>(load256(s.p + 16 + 32 * h)), bytes(3));
  }
  template <int J>
  static __m256 scale(const Row& s) {
    return halves(s.sc + 2 * J);
  }
};

}  // namespace
}  // namespace mo::ops::q8
