// Q4Z tile kernel, AVX2: maddubs + madd turn 32 int8 pairs into 8 int32 lanes.
#include "q4z.h"

#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx2,fma,f16c")
#include "q4z_tile.h"

namespace mo::ops::q4z {
namespace {

struct DotAvx2 {
  static inline __m256i run(__m256i u, __m256i s) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)); }
};
}  // namespace

q8::Kernel kernel_avx2() {
  // F16C comes with AVX2 on every CPU (Haswell, Zen); clang 14 cannot test for it.
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return nullptr;
  return tile::kernel<DotAvx2, 2, 4, 4>;  // 16 ymm registers: at most 8 accumulators
}

}  // namespace mo::ops::q4z
MO_SIMD_TARGET_POP
#else
namespace mo::ops::q4z {
q8::Kernel kernel_avx2() { return nullptr; }
}  // namespace mo::ops::q4z
#endif
