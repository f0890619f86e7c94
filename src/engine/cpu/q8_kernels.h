#pragma once
// Per-level kernel tables behind q8::kernel (q8_kernels.cpp picks one at run time).
#include <cstdint>

#include "q8.h"

namespace mo::ops::q8 {

Kernel kernel_scalar(std::uint32_t type);
Kernel kernel_avx2(std::uint32_t type);  // AVX2 maddubs/madd
Kernel kernel_vnni(std::uint32_t type);  // AVX512-VNNI dpbusd on 256-bit vectors (needs avx512vl + avx512vnni)

// Row-group kernels (q8_panel.h) for Q4_0 (and Q8_0 on VNNI); MO_Q8_PANEL=0 at start-up keeps the
// per-row tiles instead, for A/B benchmarks.
bool panel_kernels();
void set_panel_kernels(bool on);

// Row-group kernels for the engine's Q4Z (AWQ / GPTQ INT4) blocks.
Kernel q4z_panel_avx2();
Kernel q4z_panel_vnni();

// True when the CPU has AVX512-VNNI with VL (so kernel() may use kernel_vnni at SimdLevel::avx512).
bool cpu_has_vnni();

// Q3_K's 16 six-bit scales (still offset by 32) unpacked from its 12 packed bytes (thread-local storage).
const std::int8_t* q3k_scales(const std::uint8_t* packed);

}  // namespace mo::ops::q8
