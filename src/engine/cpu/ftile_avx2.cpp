// AVX2 + FMA + F16C float-tile micro-kernel (ftile_kernel.h on 8-lane vectors): 4 rows × 3 tokens =
// 12 ymm accumulators (+3 token, 1 weight register, llamafile's AVX2 tile) for prefill, 8 rows × 1
// token for decode.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ftile.h"
#include "mo/core/half.h"  // before the target region: its inline functions stay generic

#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx2,fma,f16c")
#include "ftile_blocking.h"
#include "ftile_kernel.h"
#include "vec_avx2.h"

namespace mo::ops::ftile {
RowRange kernel_avx2(std::uint32_t type) { return kernel_for<FloatTile<simd::Vec256, 4, 3, 8, false>>(type); }
RowRange16 kernel16_avx2(std::uint32_t type) { return kernel16_for<FloatTile<simd::Vec256, 4, 3, 8, false>>(type); }
void round_to_type_avx2(std::uint32_t type, const float* x, std::int64_t n, std::uint16_t* out) {
  if (type == 30)
    round_to_half<true>(x, n, out);
  else
    round_to_half<false>(x, n, out);
}
}  // namespace mo::ops::ftile

MO_SIMD_TARGET_POP
#else
namespace mo::ops::ftile {
RowRange kernel_avx2(std::uint32_t) { return nullptr; }
RowRange16 kernel16_avx2(std::uint32_t) { return nullptr; }
void round_to_type_avx2(std::uint32_t type, const float* x, std::int64_t n, std::uint16_t* out) { round_to_type(type, x, n, out); }
}  // namespace mo::ops::ftile
#endif
