#pragma once
// Shared pieces of the GGUF block encoders: ggml-quants.c's scale searches (make_qx_quants,
// make_q3_quants, make_qkx2_quants, make_qkx3_quants, make_qp_quants) and its rounding helpers. Each
// follows ggml's operation order exactly, down to the integer narrowings, because one ulp of
// difference in a sum can flip which candidate scale wins and so change every byte of a block.
#include <bit>
#include <cstdint>
#include <cstring>

#include "mo/core/half.h"

// ggml-quants.c is C, which GCC compiles without contracting a*b+c into an FMA; GCC's C++ default
// (-ffp-contract=fast) would fuse, and with -march=native that changes the sums the searches compare.
// Every file that includes this header gets exact IEEE products and sums from here on.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace mo::quant::detail {

// ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it counts as all zero.
constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int: round to nearest even by adding 1.5 * 2^23, valid for |x| <= 4194303. Outside
// that range it returns what ggml's does (the same bits), which the callers then clamp.
inline int nearest_int(float x) {
  const float v = x + 12582912.f;
  return (std::bit_cast<std::int32_t>(v) & 0x007fffff) - 0x00400000;
}

// ggml's MIN/MAX macros: `a < b ? a : b`, which differs from std::min/max only for NaN.
template <typename T>
constexpr T gmin(T a, T b) {
  return a < b ? a : b;
}
template <typename T>
constexpr T gmax(T a, T b) {
  return a > b ? a : b;
}

// GGML_FP32_TO_FP16 (round to nearest even) and back.
inline std::uint16_t fp16(float f) { return f32_to_f16(f); }
inline float fp32(std::uint16_t h) { return f16_to_f32(h); }

// Copies a block built on the stack to a destination of any alignment.
template <typename Block>
void store_block(void* dst, std::int64_t i, const Block& b) {
  std::memcpy(static_cast<std::uint8_t*>(dst) + i * static_cast<std::int64_t>(sizeof(Block)), &b, sizeof(Block));
}

// Symmetric search: L[i] in [0, 2*nmax), w ~ (L[i] - nmax) * scale, weights qw (or x^2 when null);
// returns the scale. make_qx_quants with rmse_type 1, the only kind ggml's quantizers use.
float make_qx_quants(int n, int nmax, const float* x, std::int8_t* L, const float* qw);

// Q3_K's reference search: symmetric, weights x^2, then up to 5 rounds of per-weight refinement.
float make_q3_quants(int n, int nmax, const float* x, std::int8_t* L);

// Asymmetric searches: x ~ scale * L[i] - the_min with L[i] in [0, nmax]. qkx2 is the reference
// quantizers' (mean absolute or squared error), qkx3 the importance-weighted one; `weights` is never
// null. Laux is n bytes of scratch.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L, float* the_min, std::uint8_t* Laux,
                       float rmin, float rdelta, int nstep, bool use_mad);
float make_qkx3_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L, float* the_min, std::uint8_t* Laux,
                       float rmin, float rdelta, int nstep, bool use_mad);

// Quantizes non-negative sub-block scales (or mins) x to L[i] in [0, nmax] against one super-block
// scale, weighted by quant_weights; returns that scale.
float make_qp_quants(int n, int nmax, const float* x, std::uint8_t* L, const float* quant_weights);

// Per-family row encoders (n a multiple of the block size; importance null or n weights).
void quantize_row_q4_0(const float* x, void* dst, std::int64_t n, const float* importance);
void quantize_row_q4_1(const float* x, void* dst, std::int64_t n, const float* importance);
void quantize_row_q5_0(const float* x, void* dst, std::int64_t n, const float* importance);
void quantize_row_q5_1(const float* x, void* dst, std::int64_t n, const float* importance);
void quantize_row_q8_0(const float* x, void* dst, std::int64_t n);
void quantize_row_q2_K(const float* x, void* dst, std::int64_t n, const float* importance);
void quantize_row_q3_K(const float* x, void* dst, std::int64_t n, const float* importance);
void quantize_row_q4_K(const float* x, void* dst, std::int64_t n, const float* importance);
void quantize_row_q5_K(const float* x, void* dst, std::int64_t n, const float* importance);
void quantize_row_q6_K(const float* x, void* dst, std::int64_t n, const float* importance);

}  // namespace mo::quant::detail
