#pragma once
// The float-tile micro-kernel, written once over a vector type V (vec_avx2.h, vec_avx512.h) and
// instantiated by ftile_avx2.cpp / ftile_avx512.cpp inside their target regions, after
// ftile_blocking.h; unnamed namespace so the per-level copies never merge at link time. Per (row,
// token): one V::kLanes-lane accumulator, k = 0, kLanes, 2 kLanes, ... with V::fmadd, a zero-padded
// last vector when cols % kLanes != 0, then V::hsum: the same operations for every tile shape. 16-bit
// weights meet activations already rounded to their type (ftile.h), both widened to f32 in registers.

namespace mo::ops::ftile {
namespace {

// kMR × kNR: the prefill tile; kDecodeMR: rows per tile for one token. kTokenInRegister: load each
// token vector once into a register rather than letting the compiler fold the load into each of the
// MR FMAs (helps when registers are plenty, as with 32 zmm).
template <class V, int MR_, int NR_, int DecodeMR_, bool kTokenInRegister>
struct FloatTile {
  using F = typename V::F;
  static constexpr int kMR = MR_, kNR = NR_, kDecodeMR = DecodeMR_, kLanes = V::kLanes;

  // Weight sources: kLanes weights at element k of a row as f32 (exact), and the zero-padded tail.
  struct F32 {
    static constexpr int kBytes = 4;
    static F load(const std::uint8_t* row, std::int64_t k) { return V::load(reinterpret_cast<const float*>(row) + k); }
    static F load_tail(const std::uint8_t* row, std::int64_t k, int len) {
      return V::load_tail(reinterpret_cast<const float*>(row) + k, len);
    }
  };
  template <bool kBrain_>  // bfloat16, else IEEE half
  struct Half {
    static constexpr int kBytes = 2;
    static constexpr bool kBrain = kBrain_;
    static F cvt(const void* p) {
      if constexpr (kBrain)
        return V::load_bf16(p);
      else
        return V::load_f16(p);
    }
    static F load(const std::uint8_t* row, std::int64_t k) { return cvt(row + 2 * k); }
    static F load_tail(const std::uint8_t* row, std::int64_t k, int len) {
      std::uint16_t h[kLanes] = {};
      std::memcpy(h, row + 2 * k, 2 * len);
      return cvt(h);
    }
  };
  using F16 = Half<false>;
  using BF16 = Half<true>;

  // Weights from Src, tokens from Tok (F32 for F32 weights, the weights' own 16-bit type otherwise). The
  // smaller side of the tile is held in registers and the other streamed past it; either way each
  // accumulator sees the same FMA sequence. Prefetch: also pull in the rows two tiles ahead while this one runs.
  template <class Src, class Tok, int MR, int NR, bool Prefetch>
  static void tile(const std::uint8_t* w, std::size_t ws, const std::uint8_t* x, std::size_t xs, std::int64_t cols, float* y,
                   std::int64_t ys) {
    F acc[MR][NR];
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 32
      for (int t = 0; t < NR; ++t) acc[r][t] = V::zero();
    std::int64_t k = 0;
    for (; k + kLanes <= cols; k += kLanes) {
      if constexpr (Prefetch) {  // sweep the tile two tiles ahead linearly into L2, as many bytes per step as it reads:
        // interleaved short row streams defeat the hardware prefetcher (decode from DRAM was slower without)
        const char* p = reinterpret_cast<const char*>(w + 2 * MR * ws) + k * MR * Src::kBytes;
#pragma GCC unroll 32
        for (int j = 0; j < MR * kLanes * Src::kBytes; j += 64) _mm_prefetch(p + j, _MM_HINT_T1);
      }
      step<Src, Tok, MR, NR, false>(acc, w, ws, x, xs, k, 0);
    }
    if (k < cols) {  // zero-padded last vector: 0·0 leaves the accumulator unchanged lane by lane
      const int len = static_cast<int>(cols - k);
      step<Src, Tok, MR, NR, true>(acc, w, ws, x, xs, k, len);
    }
#pragma GCC unroll 32
    for (int t = 0; t < NR; ++t)
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) y[t * ys + r] = V::hsum(acc[r][t]);
  }

  // kLanes values at element k of a row, or the first len of them zero-padded.
  template <class S, bool kTail>
  static F load(const std::uint8_t* row, std::int64_t k, int len) {
    if constexpr (kTail)
      return S::load_tail(row, k, len);
    else
      return S::load(row, k);
  }

  // One k step: acc[r][t] = fma(w_r, x_t, acc[r][t]) over the whole tile.
  template <class Src, class Tok, int MR, int NR, bool kTail>
  static void step(F (&acc)[MR][NR], const std::uint8_t* w, std::size_t ws, const std::uint8_t* x, std::size_t xs, std::int64_t k,
                   int len) {
    if constexpr (MR <= NR) {  // rows in registers, tokens streamed
      F wv[MR];
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) wv[r] = load<Src, kTail>(w + r * ws, k, len);
#pragma GCC unroll 32
      for (int t = 0; t < NR; ++t) {
        F xv = load<Tok, kTail>(x + t * xs, k, len);
        if constexpr (kTokenInRegister) __asm__("" : "+v"(xv));
#pragma GCC unroll 32
        for (int r = 0; r < MR; ++r) acc[r][t] = V::fmadd(wv[r], xv, acc[r][t]);
      }
    } else {  // tokens in registers, rows streamed
      F xv[NR];
#pragma GCC unroll 32
      for (int t = 0; t < NR; ++t) xv[t] = load<Tok, kTail>(x + t * xs, k, len);
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) {
        const F wv = load<Src, kTail>(w + r * ws, k, len);
#pragma GCC unroll 32
        for (int t = 0; t < NR; ++t) acc[r][t] = V::fmadd(wv, xv[t], acc[r][t]);
      }
    }
  }
};

// The row-range kernel of a FloatTile for ggml type F32 (0), F16 (1) or BF16 (30), else nullptr; kernel16_for: F16 / BF16 only.
template <class Kern>
RowRange kernel_for(std::uint32_t type) {
  switch (type) {
    case 0: return run_rows<Kern, typename Kern::F32>;
    case 1: return run_rows_half<Kern, typename Kern::F16>;
    case 30: return run_rows_half<Kern, typename Kern::BF16>;
    default: return nullptr;
  }
}
template <class Kern>
RowRange16 kernel16_for(std::uint32_t type) {
  switch (type) {
    case 1: return run_rows16<Kern, typename Kern::F16>;
    case 30: return run_rows16<Kern, typename Kern::BF16>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace mo::ops::ftile
