// AVX2 + FMA fused dequantize-and-dot kernels: qdot_kernels.h on 8-lane vectors.
#include "qdot_kernel_deps.h"

#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx2,fma,f16c")
#include "qdot_kernels.h"
#include "vec_avx2.h"

namespace mo::ops::qdot {
// 4 tokens' accumulators fill half the 16 ymm registers; a larger group takes two passes.
RowDot row_dot_avx2(std::uint32_t type) { return row_dot_for<simd::Vec256, 4>(type); }
}  // namespace mo::ops::qdot

MO_SIMD_TARGET_POP
#else
namespace mo::ops::qdot {
RowDot row_dot_avx2(std::uint32_t) { return nullptr; }
}  // namespace mo::ops::qdot
#endif
