// AVX512-VNNI integer-dot kernels: dpbusd on 256-bit vectors (AVX512-VL), whose 32 vector registers
// hold a 4 weight rows x 4 tokens tile.
#if defined(__x86_64__)
#include "simd_target.h"
MO_SIMD_TARGET_PUSH("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#define MO_Q8_VNNI 1
#include "q8_tile.h"
#include "q8_types.h"
#include "q8_panel.h"

namespace mo::ops::q8 {
Kernel kernel_vnni(std::uint32_t type) { return kernel_for<4, 4, 8>(type, panel_kernels()); }
Kernel q4z_panel_vnni() { return run_panel<PanelQ4Z, 8>; }
}  // namespace mo::ops::q8
MO_SIMD_TARGET_POP
#else
#include "q8_kernels.h"
namespace mo::ops::q8 {
Kernel kernel_vnni(std::uint32_t) { return nullptr; }
Kernel q4z_panel_vnni() { return nullptr; }
}  // namespace mo::ops::q8
#endif
