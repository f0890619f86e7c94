#pragma once
// The cache blocking around a float-tile micro-kernel, shared by the SIMD levels. Included by
// ftile_avx512.cpp / ftile_avx2.cpp inside their target regions (so everything here is compiled for
// that level), after they have included <cstddef>, <cstdint> and <vector>; all in an unnamed namespace
// so the per-level copies never merge at link time.
//
// A level's `Kern` provides: kMR, kNR (prefill tile), kDecodeMR (rows per tile when n = 1), element
// sources F32 / F16 / BF16, and `template <class Src, class Tok, int MR, int NR, bool Prefetch> static
// void tile(w, w_stride, x, x_stride, cols, y, ys)` (strides in bytes).
// Which tile shape covers a (row, token) never changes its result, so the blocking is free to vary.

namespace mo::ops::ftile {
namespace {

using TileFn = void (*)(const std::uint8_t* w, std::size_t w_stride, const std::uint8_t* x, std::size_t x_stride, std::int64_t cols,
                        float* y, std::int64_t ys);

// Every tile shape up to the level's kMR × kNR, and kDecodeMR × 1 for single-token calls (whose rows
// stream from memory, so those prefetch).
template <class Kern, class Src, class Tok>
struct Tiles {
  TileFn main[Kern::kMR + 1][Kern::kNR + 1] = {};
  TileFn decode[Kern::kDecodeMR + 1] = {};
  template <int MR, int NR>
  void fill_main() {
    if constexpr (MR > 0 && NR > 0) {
      main[MR][NR] = &Kern::template tile<Src, Tok, MR, NR, Src::kBytes == 4>;
      if constexpr (NR > 1)
        fill_main<MR, NR - 1>();
      else
        fill_main<MR - 1, Kern::kNR>();
    }
  }
  template <int MR>
  void fill_decode() {
    if constexpr (MR > 0) {
      decode[MR] = &Kern::template tile<Src, Tok, MR, 1, true>;
      fill_decode<MR - 1>();
    }
  }
  Tiles() {
    fill_main<Kern::kMR, Kern::kNR>();
    fill_decode<Kern::kDecodeMR>();
  }
};

// F32 weights: activations per token block stay in L2 while every row panel of the thread passes over it.
constexpr std::int64_t kTokenBlockBytes = 384 * 1024;
constexpr std::int64_t kPanelRows = 16;
// 16-bit weights: token tiles per chunk. A row tile (kMR rows) stays in L1 while the chunk's rounded
// activations (about 72 tokens on AVX2) stream past it from L2, as in llamafile's tinyBLAS.
constexpr std::int64_t kChunkTiles = 24;

// Single-token calls: stream the stored rows once, kDecodeMR at a time.
template <class Kern, class Src, class Tok>
void decode_rows(const Tiles<Kern, Src, Tok>& tiles, const Weights& w, std::int64_t r0, std::int64_t r1, const std::uint8_t* x, float* y,
                 std::int64_t ys) {
  for (std::int64_t r = r0; r < r1; r += Kern::kDecodeMR) {
    const int mr = static_cast<int>(r1 - r < Kern::kDecodeMR ? r1 - r : Kern::kDecodeMR);
    tiles.decode[mr](w.data + r * w.row_bytes, w.row_bytes, x, 0, w.cols, y + r, ys);
  }
}

template <class Kern, class Src>
void run_rows(const Weights& w, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t xs, std::int64_t n, float* y,
              std::int64_t ys) {
  static const Tiles<Kern, Src, Src> tiles;
  const auto* xb = reinterpret_cast<const std::uint8_t*>(x);
  const std::size_t xsb = static_cast<std::size_t>(xs) * 4;
  if (n == 1) return decode_rows(tiles, w, r0, r1, xb, y, ys);
  std::int64_t tb = kTokenBlockBytes / (w.cols * 4) / Kern::kNR * Kern::kNR;
  if (tb < Kern::kNR) tb = Kern::kNR;
  for (std::int64_t t0 = 0; t0 < n; t0 += tb) {
    const std::int64_t te = n - t0 < tb ? n : t0 + tb;
    for (std::int64_t p0 = r0; p0 < r1; p0 += kPanelRows) {
      const std::int64_t pe = r1 - p0 < kPanelRows ? r1 : p0 + kPanelRows;
      for (std::int64_t t = t0; t < te; t += Kern::kNR) {
        const int nr = static_cast<int>(te - t < Kern::kNR ? te - t : Kern::kNR);
        for (std::int64_t r = p0; r < pe; r += Kern::kMR) {
          const int mr = static_cast<int>(pe - r < Kern::kMR ? pe - r : Kern::kMR);
          tiles.main[mr][nr](w.data + r * w.row_bytes, w.row_bytes, xb + t * xsb, xsb, w.cols, y + t * ys + r, ys);
        }
      }
    }
  }
}

// n f32 values rounded to nearest even as IEEE half (kBrain false) or bfloat16: mo::f32_to_f16 /
// mo::f32_to_bf16 bit for bit, 8 at a time (F16C / AVX2, present at both vector levels).
template <bool kBrain>
void round_to_half(const float* x, std::int64_t n, std::uint16_t* out) {
  std::int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 v = _mm256_loadu_ps(x + k);
    __m128i h;
    if constexpr (kBrain) {
      const __m256i b = _mm256_castps_si256(v);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
      const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
      const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
      const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
      const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
      h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8));
    } else {
      h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), h);
  }
  for (; k < n; ++k) out[k] = kBrain ? f32_to_bf16(x[k]) : f32_to_f16(x[k]);
}

// F16 / BF16 weights on activations already rounded to their type (as llama.cpp does: its vec_dot_type),
// which halves what the tiles read; tinyBLAS's order: per row tile, a chunk of token tiles.
template <class Kern, class Src>
void run_rows16(const Weights& w, std::int64_t r0, std::int64_t r1, const std::uint16_t* x, std::int64_t xs, std::int64_t n, float* y,
                std::int64_t ys) {
  static const Tiles<Kern, Src, Src> tiles;
  const std::int64_t cols = w.cols;
  const auto* xb = reinterpret_cast<const std::uint8_t*>(x);
  const std::size_t xsb = static_cast<std::size_t>(xs) * 2;
  if (n == 1) return decode_rows(tiles, w, r0, r1, xb, y, ys);
  const std::int64_t chunk = kChunkTiles * Kern::kNR;
  for (std::int64_t t0 = 0; t0 < n; t0 += chunk) {
    const std::int64_t te = n - t0 < chunk ? n : t0 + chunk;
    const std::int64_t tiles_in_chunk = (te - t0 + Kern::kNR - 1) / Kern::kNR;
    for (std::int64_t r = r0; r < r1; r += Kern::kMR) {
      const int mr = static_cast<int>(r1 - r < Kern::kMR ? r1 - r : Kern::kMR);
      // The next row tile, a slice per token tile, into L2: else its first pass waits on memory.
      const std::int64_t next_rows = r1 - r - Kern::kMR < Kern::kMR ? r1 - r - Kern::kMR : Kern::kMR;
      const std::int64_t next_bytes = next_rows > 0 ? next_rows * static_cast<std::int64_t>(w.row_bytes) : 0;
      const char* next = reinterpret_cast<const char*>(next_bytes > 0 ? w.data + (r + Kern::kMR) * w.row_bytes : w.data);
      const std::int64_t slice = (next_bytes / tiles_in_chunk + 63) / 64 * 64;
      std::int64_t fetched = 0;
      for (std::int64_t t = t0; t < te; t += Kern::kNR) {
        const int nr = static_cast<int>(te - t < Kern::kNR ? te - t : Kern::kNR);
        for (std::int64_t b = 0; b < slice && fetched < next_bytes; b += 64, fetched += 64) _mm_prefetch(next + fetched, _MM_HINT_T1);
        tiles.main[mr][nr](w.data + r * w.row_bytes, w.row_bytes, xb + t * xsb, xsb, cols, y + t * ys + r, ys);
      }
    }
  }
}

// The same on f32 activations, rounded here first.
template <class Kern, class Src>
void run_rows_half(const Weights& w, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t xs, std::int64_t n, float* y,
                   std::int64_t ys) {
  thread_local std::vector<std::uint16_t> rounded;
  if (static_cast<std::int64_t>(rounded.size()) < n * w.cols) rounded.resize(static_cast<std::size_t>(n * w.cols));
  for (std::int64_t t = 0; t < n; ++t) round_to_half<Src::kBrain>(x + t * xs, w.cols, rounded.data() + t * w.cols);
  run_rows16<Kern, Src>(w, r0, r1, rounded.data(), w.cols, n, y, ys);
}

}  // namespace
}  // namespace mo::ops::ftile
