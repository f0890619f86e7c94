// AVX-512 fused dequantize-and-dot kernels: qdot_kernels.h on 16-lane vectors.
#include "qdot_kernel_deps.h"

#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx512f,avx2,fma,f16c")
#include "vec_avx512.h"  // first: its warning switches cover the kernels
#include "qdot_kernels.h"

namespace mo::ops::qdot {
// 8 tokens' accumulators (16 registers) stay in the 32 zmm registers: one pass per group.
RowDot row_dot_avx512(std::uint32_t type) { return row_dot_for<simd::Vec512, 8>(type); }
}  // namespace mo::ops::qdot

MO_SIMD_TARGET_POP
#else
namespace mo::ops::qdot {
RowDot row_dot_avx512(std::uint32_t) { return nullptr; }
}  // namespace mo::ops::qdot
#endif
