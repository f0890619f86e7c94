// Run-time choice of the integer-dot kernel level: AVX512-VNNI when SimdLevel::avx512 is on and the CPU
// has avx512vnni + avx512vl, else AVX2 at avx2 or above, else the portable kernels.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "q4z.h"
#include "q8_kernels.h"

namespace mo::ops::q8 {

bool cpu_has_vnni() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return has;
#else
  return false;
#endif
}

namespace {
std::atomic<bool> g_panel{[] {
  const char* e = std::getenv("MO_Q8_PANEL");
  return e == nullptr || std::strcmp(e, "0") != 0;
}()};
}  // namespace

bool panel_kernels() { return g_panel; }
void set_panel_kernels(bool on) { g_panel = on; }

Kernel kernel(std::uint32_t type, SimdLevel level) {
  if (type == engine::kQ4zType) return kernel_q4z(type, level);  // AWQ / GPTQ INT4 blocks (q4z_*.cpp)
  if (level == SimdLevel::avx512 && cpu_has_vnni()) return kernel_vnni(type);
  if (level >= SimdLevel::avx2) return kernel_avx2(type);
  return kernel_scalar(type);
}

}  // namespace mo::ops::q8
