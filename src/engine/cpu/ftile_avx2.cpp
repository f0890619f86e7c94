// AVX2 + FMA + F16C float-tile micro-kernel (ftile_kernel.h on 8-lane vectors): 3 rows × 4 tokens =
// 12 ymm accumulators (+3 weight, 1 token register) for prefill, 8 rows × 1 token for decode.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ftile.h"

#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx2,fma,f16c")
#include "ftile_blocking.h"
#include "ftile_kernel.h"
#include "vec_avx2.h"

namespace mo::ops::ftile {
RowRange kernel_avx2(std::uint32_t type) { return kernel_for<FloatTile<simd::Vec256, 3, 4, 8, false>>(type); }
}  // namespace mo::ops::ftile

MO_SIMD_TARGET_POP
#else
namespace mo::ops::ftile {
RowRange kernel_avx2(std::uint32_t) { return nullptr; }
}  // namespace mo::ops::ftile
#endif
