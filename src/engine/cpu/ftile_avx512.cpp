// AVX-512 float-tile micro-kernel (ftile_kernel.h on 16-lane vectors): 4 rows × 6 tokens = 24 zmm
// accumulators (+4 weight, 1 token register) for prefill, 4 rows × 1 token for decode.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ftile.h"
#include "mo/core/half.h"  // before the target region: its inline functions stay generic

#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx512f,avx2,fma,f16c")
#include "vec_avx512.h"  // first: its warning switches cover the kernels
#include "ftile_blocking.h"
#include "ftile_kernel.h"

namespace mo::ops::ftile {
RowRange kernel_avx512(std::uint32_t type) { return kernel_for<FloatTile<simd::Vec512, 4, 6, 4, true>>(type); }
RowRange16 kernel16_avx512(std::uint32_t type) { return kernel16_for<FloatTile<simd::Vec512, 4, 6, 4, true>>(type); }
}  // namespace mo::ops::ftile

MO_SIMD_TARGET_POP
#else
namespace mo::ops::ftile {
RowRange kernel_avx512(std::uint32_t) { return nullptr; }
RowRange16 kernel16_avx512(std::uint32_t) { return nullptr; }
}  // namespace mo::ops::ftile
#endif
