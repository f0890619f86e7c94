#pragma once
// a*b + c with one rounding where the CPU has an FMA unit: left to -ffp-contract, a vectorized loop body and
// its scalar tail (or a plain loop and its intrinsic twin) may round differently. Without an FMA unit there is
// nothing to contract to, so the plain expression rounds the same everywhere.
#include <cmath>

namespace mo::ops {

#if defined(__FMA__)
inline float madd(float a, float b, float c) { return std::fma(a, b, c); }
#else
inline float madd(float a, float b, float c) { return a * b + c; }
#endif

}  // namespace mo::ops
