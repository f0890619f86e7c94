#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "mo/engine/ops/linear.h"

// GCC 12 warns about the deliberately undefined upper lanes inside _mm512_reduce_add_ps.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace mo::ops {
namespace {

float dot_scalar(const float* a, const float* b, std::int64_t n) {
  // Eight partial sums: the same association order as the 8-lane AVX2 kernel, a different one from
  // a naive loop, so results are close but not bit-identical across levels.
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  float total = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, std::int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 lo = _mm256_castps256_ps128(acc), hi = _mm256_extractf128_ps(acc, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_hadd_ps(lo, lo);
  lo = _mm_hadd_ps(lo, lo);
  float total = _mm_cvtss_f32(lo);
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

__attribute__((target("avx512f"))) float dot_avx512(const float* a, const float* b, std::int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

SimdLevel detect() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return SimdLevel::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdLevel::avx2;
#endif
  return SimdLevel::scalar;
}

const SimdLevel kBest = detect();

// MO_SIMD=scalar|avx2|avx512 caps the level (never above what the CPU has): the same level gives the same
// bits on any machine that has it, which is how the documentation's examples are checked everywhere.
SimdLevel initial_level() {
  const char* e = std::getenv("MO_SIMD");
  if (e == nullptr || *e == '\0') return kBest;
  const std::string v = e;
  if (v == "scalar") return SimdLevel::scalar;
  if (v == "avx2") return std::min(SimdLevel::avx2, kBest);
  if (v == "avx512") return kBest;
  std::fprintf(stderr, "warning: MO_SIMD=%s is not one of scalar, avx2, avx512; using the CPU's best level\n", e);
  return kBest;
}

SimdLevel g_level = initial_level();

}  // namespace

SimdLevel simd_level() { return g_level; }
void set_simd_level(SimdLevel level) { g_level = std::min(level, kBest); }
const char* simd_level_name(SimdLevel level) {
  return level == SimdLevel::avx512 ? "avx512" : level == SimdLevel::avx2 ? "avx2" : "scalar";
}

float dot_f32(const float* a, const float* b, std::int64_t n) {
  switch (g_level) {
    case SimdLevel::avx512: return dot_avx512(a, b, n);
    case SimdLevel::avx2: return dot_avx2(a, b, n);
    default: return dot_scalar(a, b, n);
  }
}

}  // namespace mo::ops
