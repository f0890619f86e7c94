// AVX2 integer-dot kernels (maddubs + madd, as ggml's AVX2 path): 2 weight rows x 4 tokens per tile.
#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx2,fma,f16c")
#define MO_Q8_VNNI 0
#include "q8_tile.h"
#include "q8_types.h"
#include "q8_panel.h"

namespace mo::ops::q8 {
Kernel kernel_avx2(std::uint32_t type) { return kernel_for<2, 4, 4>(type, panel_kernels()); }
Kernel q4z_panel_avx2() { return run_panel<PanelQ4Z, 4>; }
}  // namespace mo::ops::q8
MO_SIMD_TARGET_POP
#else
#include "q8_kernels.h"
namespace mo::ops::q8 {
Kernel kernel_avx2(std::uint32_t) { return nullptr; }
Kernel q4z_panel_avx2() { return nullptr; }
}  // namespace mo::ops::q8
#endif
