#pragma once
// The cache blocking around a float-tile micro-kernel, shared by the SIMD levels. Included by
// ftile_avx512.cpp / ftile_avx2.cpp inside their target regions (so everything here is compiled for
// that level), after they have included <cstddef>, <cstdint> and <vector>; all in an unnamed namespace
// so the per-level copies never merge at link time.
//
// A level's `Kern` provides: kMR, kNR (prefill tile), kDecodeMR (rows per tile when n = 1), sources
// F32 / F16 / BF16 (each with `static void decode(const uint8_t* row, int64_t cols, float* out)`), and
// `template <class Src, int MR, int NR, bool Prefetch> static void tile(w, w_stride, x, xs, cols, y, ys)`.
// Which tile shape covers a (row, token) never changes its result, so the blocking is free to vary.

namespace mo::ops::ftile {
namespace {

using TileFn = void (*)(const std::uint8_t* w, std::size_t w_stride, const float* x, std::int64_t xs, std::int64_t cols, float* y,
                        std::int64_t ys);

// Every tile shape up to the level's kMR × kNR, plus kDecodeMR × 1 for single-token calls.
template <class Kern, class Src, bool Prefetch>
struct Tiles {
  TileFn main[Kern::kMR + 1][Kern::kNR + 1] = {};
  TileFn decode[Kern::kDecodeMR + 1] = {};
  template <int MR, int NR>
  void fill_main() {
    if constexpr (MR > 0 && NR > 0) {
      main[MR][NR] = &Kern::template tile<Src, MR, NR, Prefetch>;
      if constexpr (NR > 1)
        fill_main<MR, NR - 1>();
      else
        fill_main<MR - 1, Kern::kNR>();
    }
  }
  template <int MR>
  void fill_decode() {
    if constexpr (MR > 0) {
      decode[MR] = &Kern::template tile<Src, MR, 1, Prefetch>;
      fill_decode<MR - 1>();
    }
  }
  Tiles() {
    fill_main<Kern::kMR, Kern::kNR>();
    fill_decode<Kern::kDecodeMR>();
  }
};

// Activations per token block: the block stays in L2 while every row panel of the thread passes over it.
constexpr std::int64_t kTokenBlockBytes = 384 * 1024;
// F16/BF16 (packed) calls: a panel's f32 decode costs as much as a tile pass over 6 tokens, so the block is
// as large as the L3 holds well and each panel is decoded once for it (1B shape, F16 pp512: 66 -> 84 t/s).
constexpr std::int64_t kPackedTokenBlockBytes = 8 * 1024 * 1024;
// Rows per panel: their f32 form (decoded once per token block for F16/BF16) stays in L1/L2 while the
// block's token tiles pass over it.
constexpr std::int64_t kPanelRows = 16;

template <class Kern, class Src>
void run_rows(const Weights& w, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t xs, std::int64_t n, float* y,
              std::int64_t ys) {
  // Stored rows are streamed from memory (prefetch the next tile's); panel rows are already cached.
  static const Tiles<Kern, Src, true> direct;
  static const Tiles<Kern, typename Kern::F32, false> unpacked;
  const std::int64_t cols = w.cols;
  if (n == 1) {  // decode: stream the stored rows once, kDecodeMR at a time
    for (std::int64_t r = r0; r < r1; r += Kern::kDecodeMR) {
      const int mr = static_cast<int>(r1 - r < Kern::kDecodeMR ? r1 - r : Kern::kDecodeMR);
      direct.decode[mr](w.data + r * w.row_bytes, w.row_bytes, x, xs, cols, y + r, ys);
    }
    return;
  }
  // F16/BF16 rows reused by more than one token tile: decode them once per token block.
  const bool pack = w.type != 0 && n > Kern::kNR;
  thread_local std::vector<float> panel;
  if (pack && static_cast<std::int64_t>(panel.size()) < kPanelRows * cols) panel.resize(kPanelRows * cols);
  std::int64_t tb = (pack ? kPackedTokenBlockBytes : kTokenBlockBytes) / (cols * 4) / Kern::kNR * Kern::kNR;
  if (tb < Kern::kNR) tb = Kern::kNR;
  for (std::int64_t t0 = 0; t0 < n; t0 += tb) {
    const std::int64_t te = n - t0 < tb ? n : t0 + tb;
    for (std::int64_t p0 = r0; p0 < r1; p0 += kPanelRows) {
      const std::int64_t pe = r1 - p0 < kPanelRows ? r1 : p0 + kPanelRows;
      const std::uint8_t* base = w.data + p0 * w.row_bytes;
      std::size_t stride = w.row_bytes;
      if (pack) {
        for (std::int64_t r = p0; r < pe; ++r) Src::decode(w.data + r * w.row_bytes, cols, panel.data() + (r - p0) * cols);
        base = reinterpret_cast<const std::uint8_t*>(panel.data());
        stride = static_cast<std::size_t>(cols) * 4;
      }
      for (std::int64_t t = t0; t < te; t += Kern::kNR) {
        const int nr = static_cast<int>(te - t < Kern::kNR ? te - t : Kern::kNR);
        for (std::int64_t r = p0; r < pe; r += Kern::kMR) {
          const int mr = static_cast<int>(pe - r < Kern::kMR ? pe - r : Kern::kMR);
          const TileFn fn = pack ? unpacked.main[mr][nr] : direct.main[mr][nr];
          fn(base + (r - p0) * stride, stride, x + t * xs, xs, cols, y + t * ys + r, ys);
        }
      }
    }
  }
}

}  // namespace
}  // namespace mo::ops::ftile
