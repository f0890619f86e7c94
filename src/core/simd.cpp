#include "mo/core/simd.h"

#include <vector>

namespace mo {

std::string simd_compiled() {
  std::vector<std::string> f;
#if defined(__AVX512F__)
  f.push_back("avx512f");
#endif
#if defined(__AVX512BW__)
  f.push_back("avx512bw");
#endif
#if defined(__AVX512VNNI__)
  f.push_back("avx512vnni");
#endif
#if defined(__AVX2__)
  f.push_back("avx2");
#endif
#if defined(__FMA__)
  f.push_back("fma");
#endif
#if defined(__F16C__)
  f.push_back("f16c");
#endif
#if defined(__SSE4_2__)
  f.push_back("sse4.2");
#endif
#if defined(__ARM_NEON)
  f.push_back("neon");
#endif
  if (f.empty()) return "scalar";
  std::string level = f.front() == "avx512f" ? "avx512" : f.front();
  std::string out = level + " (";
  for (size_t i = 0; i < f.size(); ++i) out += (i ? ", " : "") + f[i];
  return out + ")";
}

std::string simd_cpu() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  std::string out;
  auto add = [&](bool has, const char* name) {
    if (has) out += (out.empty() ? "" : " ") + std::string(name);
  };
  __builtin_cpu_init();
  add(__builtin_cpu_supports("avx512f"), "avx512f");
  add(__builtin_cpu_supports("avx2"), "avx2");
  add(__builtin_cpu_supports("fma"), "fma");
  add(__builtin_cpu_supports("sse4.2"), "sse4.2");
  return out.empty() ? "scalar" : out;
#else
  return simd_compiled();
#endif
}

}  // namespace mo
