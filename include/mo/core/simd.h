#pragma once
#include <string>

namespace mo {

// SIMD level the binary was compiled for, e.g. "avx512 (avx512f, avx2, fma)".
std::string simd_compiled();
// SIMD features this CPU offers at run time, e.g. "avx512f avx2 fma".
std::string simd_cpu();

}  // namespace mo
