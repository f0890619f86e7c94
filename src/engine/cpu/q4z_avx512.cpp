// Q4Z tile kernel, AVX-512 VNNI on 256-bit vectors (avx512vl): dpbusd turns 32 int8 pairs into 8 int32
// lanes in one instruction, and the 32 vector registers hold a 4 x 4 tile.
#include "q4z.h"

#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx512f,avx512vl,avx512vnni,avx2,fma,f16c")
#include "q4z_tile.h"

namespace mo::ops::q4z {
namespace {

struct DotVnni {
  static inline __m256i run(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};
}  // namespace

q8::Kernel kernel_avx512() {
  if (!__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512vnni")) return nullptr;
  return tile::kernel<DotVnni, 4, 4, 4>;
}

}  // namespace mo::ops::q4z
MO_SIMD_TARGET_POP
#else
namespace mo::ops::q4z {
q8::Kernel kernel_avx512() { return nullptr; }
}  // namespace mo::ops::q4z
#endif
